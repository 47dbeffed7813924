# -*- coding: utf-8 -*-
# Copyright: continuity.artemis contributors
# Apache License 2.0 (see LICENSE or https://www.apache.org/licenses/LICENSE-2.0)

from __future__ import absolute_import, division, print_function

__metaclass__ = type


class ModuleDocFragment(object):
    # Jolokia connection options shared by every module of the continuity.artemis.jolokia action group.
    DOCUMENTATION = r'''
options:
  url:
    description:
      - Jolokia endpoint of the broker, for example V(http://dc1.example.com:8161/console/jolokia).
      - Every request is a JSON POST to this URL.
    type: str
    required: true
  username:
    description:
      - User of the broker's JAAS realm (C(artemis-users.properties)).
      - The user needs a role listed in C(HAWTIO_ROLE) (default C(amq)); operations also need C(management.xml)
        permission.
    type: str
  password:
    description:
      - Password of O(username). Never logged.
    type: str
  broker_name:
    description:
      - Artemis broker name (the C(broker) key of the ObjectNames).
      - When omitted, the module searches the broker MBeans and uses the only one; it fails listing the names
        when there are several or when the given name does not exist.
    type: str
  validate_certs:
    description:
      - Verify the TLS certificate of an V(https) O(url). Turn off only in a lab.
    type: bool
    default: true
  ca_path:
    description:
      - PEM file with the CA certificate(s) to verify the broker's TLS certificate.
    type: path
  origin:
    description:
      - C(Origin) header sent with every request. The broker's C(jolokia-access.xml) refuses requests whose
        origin is not allowed (C(<strict-checking/>)).
      - Default is the scheme, host and port of O(url), which the stock C(allow-origin) V(*://<http-host>*) accepts.
      - An empty string sends no C(Origin) header.
    type: str
  timeout:
    description:
      - Seconds to wait for the broker's HTTP answer.
    type: float
    default: 10.0
notes:
  - Read-only requests (read, search, version and listing operations) are retried twice with backoff after a
    connection error; operations that change state are never retried.
  - Use C(module_defaults) with C(group/continuity.artemis.jolokia) to set the connection options once.
'''

    # The other site of a mirrored pair, for modules that compare or gate both sites.
    PEER = r'''
options:
  peer:
    description:
      - Connection options of the peer site (the other end of the mirror).
    type: dict
    suboptions:
      url:
        description: Jolokia endpoint of the peer broker.
        type: str
        required: true
      username:
        description: User on the peer broker.
        type: str
      password:
        description: Password of the peer user. Never logged.
        type: str
      broker_name:
        description: Peer broker name; discovered when omitted.
        type: str
      validate_certs:
        description: Verify the peer's TLS certificate.
        type: bool
        default: true
      ca_path:
        description: CA file for the peer's TLS certificate.
        type: path
      origin:
        description: C(Origin) header for the peer; default derived from the peer O(peer.url).
        type: str
      timeout:
        description: Seconds to wait for the peer's HTTP answer.
        type: float
        default: 10.0
'''
