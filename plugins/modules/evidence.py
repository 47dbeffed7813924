#!/usr/bin/python
# -*- coding: utf-8 -*-
# Copyright: continuity.artemis contributors
# Apache License 2.0 (see LICENSE or https://www.apache.org/licenses/LICENSE-2.0)

from __future__ import absolute_import, division, print_function

__metaclass__ = type

DOCUMENTATION = r'''
---
module: evidence
short_description: Append continuity evidence records (run, phase, incident, lag samples) to a run directory
description:
  - Writes records of the continuity evidence format (C(schemas/evidence-v1.schema.json), C(docs/evidence.md)) as JSON
    lines to C(<evidence_dir>/<run_id>/<file>). Every record is built by the collection's one evidence writer and
    validated before anything is written; one invalid record fails the task and writes nothing.
  - Used by the runbooks for their run, phase and incident records, so the pipeline can prove what happened.
author:
  - continuity.artemis contributors (@continuity-artemis)
extends_documentation_fragment:
  - continuity.artemis.in_process
options:
  evidence_dir:
    description: Directory that holds one sub-directory per run.
    type: path
    required: true
  run_id:
    description: Run id (letters, digits, C(.), C(_), C(-)).
    type: str
    required: true
  file:
    description: File name inside the run directory.
    type: str
    default: runbook.jsonl
  records:
    description:
      - Records to append. Each needs C(kind) (V(run), V(phase), V(incident), V(lag_sample), V(canary), ...) and the
        fields of that kind; C(schema), C(run_id) and C(ts) are filled in.
    type: list
    elements: dict
    required: true
attributes:
  check_mode:
    description: Validates the records and writes nothing.
    support: full
  diff_mode:
    description: Nothing to diff.
    support: none
'''

EXAMPLES = r'''
- name: Record the start of a rehearsal
  continuity.artemis.evidence:
    evidence_dir: "{{ continuity_evidence_dir }}"
    run_id: "{{ continuity_run_id }}"
    file: run.jsonl
    records:
      - kind: run
        event: start
        scenario: rehearsal
        targets: {rpo_seconds: 5, rto_seconds: 60}
'''

RETURN = r'''
evidence_file:
  description: File the records were appended to.
  returned: always
  type: str
written:
  description: Number of records written.
  returned: always
  type: int
records:
  description: The records as written (with schema, run_id and ts).
  returned: always
  type: list
  elements: dict
'''


from ansible.module_utils.basic import AnsibleModule

from ansible_collections.continuity.artemis.plugins.module_utils import evidence


#: Shared with the controller-side action plugin (plugins/action/evidence.py), which validates the same way.
ARGUMENT_SPEC = dict(
    evidence_dir=dict(type="path", required=True),
    run_id=dict(type="str", required=True),
    file=dict(type="str", default="runbook.jsonl"),
    records=dict(type="list", elements="dict", required=True),
)


def module_kwargs():
    """Keyword arguments of the AnsibleModule, shared with the action plugin of the same name."""
    return dict(argument_spec=ARGUMENT_SPEC, supports_check_mode=True)


def run_module(module):
    p = module.params
    try:
        out = evidence.append_records(p["evidence_dir"], p["run_id"], p["file"], p["records"], module.check_mode)
    except evidence.EvidenceError as exc:
        module.fail_json(msg="invalid evidence record: %s" % exc)
    module.exit_json(changed=not module.check_mode, **out)


def main():
    run_module(AnsibleModule(**module_kwargs()))


if __name__ == "__main__":
    main()
