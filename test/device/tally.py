"""What every GPU test script here shares: one PASS/FAIL line per check,
the closing `N passed, N failed` that scripts/gpu-tests.sh adds up, the
exit status (an exception counts as a failure, never as a pass), the check
that bad arguments are refused before anything is launched, and CUDA-graph
replays on new inputs."""
import sys
import traceback


class Tally:
    def __init__(self):
        self.passed = self.failed = 0

    def report(self, ok, what, detail=""):
        self.passed += bool(ok)
        self.failed += not ok
        print(f"{'PASS' if ok else 'FAIL'} {what}{': ' + detail if detail else ''}", flush=True)

    def summary(self):
        """Prints the closing line; returns the exit status."""
        print(f"{self.passed} passed, {self.failed} failed")
        return 0 if self.failed == 0 else 1


def refused_without_launch(cases, attempt, out, error_type):
    """The names of `cases` (name -> argument change) for which
    attempt(change) raises `error_type` and leaves `out` all NaN (it is
    filled with NaN before each): refused, nothing launched. Prints each
    message."""
    import torch

    refused = []
    for why, change in cases.items():
        out.fill_(float("nan"))
        try:
            attempt(change)
            torch.cuda.synchronize()
        except error_type as error:
            torch.cuda.synchronize()
            if torch.isnan(out).all():
                refused.append(why)
            print(f"  {why}: {error}")
    return refused


def warm_up_on_side_stream(call):
    """call() on a fresh stream (a warm-up before CUDA-graph capture), after
    everything queued on the current stream and finished before returning.
    Without the wait the call would race with the current stream's queued
    work: the caching allocator hands out memory freed there at once (a
    test's temporaries), so the call could overwrite inputs of a reference
    still being computed, and read inputs not yet written."""
    import torch

    stream = torch.cuda.Stream()
    stream.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(stream):
        call()
    torch.cuda.synchronize()


def graph_replay_errors(call, refresh, poison, error, replays=2):
    """call() captured in a CUDA graph (after a warm-up run on a side
    stream), then per replay: refresh() the inputs in place, poison() the
    outputs, replay, and error() of the result. Returns the errors."""
    import torch

    warm_up_on_side_stream(call)
    graph = torch.cuda.CUDAGraph()
    with torch.cuda.graph(graph):
        call()
    errors = []
    for _ in range(replays):
        refresh()
        poison()
        graph.replay()
        torch.cuda.synchronize()
        errors.append(error())
    return errors


def run(main):
    """sys.exit(main()), where main returns Tally.summary()."""
    try:
        sys.exit(main())
    except Exception:
        traceback.print_exc()
        print("0 passed, 1 failed")
        sys.exit(1)
