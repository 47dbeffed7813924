# -*- coding: utf-8 -*-
# Copyright: continuity.artemis contributors
# Apache License 2.0 (see LICENSE or https://www.apache.org/licenses/LICENSE-2.0)
"""The Jolokia connection options of a site, for `module_defaults: group/continuity.artemis.jolokia` and for the
site options of the two-site modules: the runbooks name a site once instead of repeating its endpoint."""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

from ansible.errors import AnsibleFilterError

# site key (playbooks/sites.yml, continuity_site_info) -> module option (doc fragment continuity.artemis.jolokia)
REQUIRED = (("jolokia_url", "url"), ("username", "username"), ("password", "password"),
            ("broker_name", "broker_name"))
OPTIONAL = (("origin", "origin"), ("validate_certs", "validate_certs"))


def jolokia_connection(site, on_host=False, ca_path=None):
    """``site``: one entry of ``continuity_sites``. Where the task runs decides which CA file verifies the
    broker: the controller's (the site's ``ca_path``, default); the site's own broker host (``on_host``, a task
    delegated there: the broker role's copy, ``host_ca_path``); or another file named by ``ca_path`` (a task on
    the other site's host)."""
    if not isinstance(site, dict):
        raise AnsibleFilterError("jolokia_connection expects a site of continuity_sites (a dict), got %s"
                                 % type(site).__name__)
    missing = [key for key, _option in REQUIRED if site.get(key) in (None, "")]
    if missing:
        raise AnsibleFilterError("site %s has no %s (playbooks/sites.yml builds them from the broker role's "
                                 "inventory variables)" % (site.get("name", "?"), ", ".join(missing)))
    out = dict((option, site[key]) for key, option in REQUIRED)
    out.update((option, site[key]) for key, option in OPTIONAL if site.get(key) is not None)
    ca_path = ca_path or site.get("host_ca_path" if on_host else "ca_path")
    if ca_path:
        out["ca_path"] = ca_path
    return out


class FilterModule(object):
    def filters(self):
        return {"jolokia_connection": jolokia_connection}
