"""The rank-0 results lines of one run of a bench/train harness (vs_ddp.sh,
gossip_vs_allreduce.sh, streams.sh): cluster_run.sh appends each run's JSON line, tagged
RUN_ID/part/.../round, to the RESULTS file, or an error line when the run failed."""
import json


def run_lines(path, run_id, parts):
    """(tag parts after the run id, record) of every successful line of run_id whose tag
    has `parts` parts after it."""
    for text in open(path):
        try:
            r = json.loads(text)
        except ValueError:
            continue
        tag = r.get("tag", "").split("/")
        if len(tag) == parts + 1 and tag[0] == run_id and "error" not in r:
            yield tag[1:], r
