"""The live executor: MCPP (or any registered method) closed-loop on OpenAI-compatible endpoints.

A workflow is one pool line (the DAG and the statistics the planner plans
with) plus a task per node (what to send, how to judge the answer). The
executor runs it online within a hard budget and a hard wall-clock deadline:
at the start and after every finished batch it asks the method what to
launch, sends each chosen (node, model, k) as k concurrent requests, judges
the answers and writes every event to an fsynced JSONL trace.

Modules, bottom up: :mod:`executor.endpoints` (the endpoints file),
:mod:`executor.tasks` (prompts and verdicts), :mod:`executor.clock`
(wall and time-scaled clocks), :mod:`executor.trace` (the trace and its
summary), :mod:`executor.gateway` (what a gateway's answer means for the
bill), :mod:`executor.client` (one request with faults, retries and the
deadline), :mod:`executor.reaper` (the parent that ends every descendant of a
verifier command), :mod:`executor.starvation` (why a deadline slipped),
:mod:`executor.estimates` (in-flight remaining times, the
posterior update), :mod:`executor.live` (one live run), :mod:`executor.world`
(the loopback world), :mod:`executor.agree` (closed-loop agreement with the
simulator), :mod:`executor.cli` (``python -m executor``). See docs/executor.md.
"""
