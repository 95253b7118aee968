"""What every GPU test script here shares: one PASS/FAIL line per check,
the closing `N passed, N failed` that scripts/gpu-tests.sh adds up, the
exit status (an exception counts as a failure, never as a pass), and the
check that bad arguments are refused before anything is launched."""
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


def run(main):
    """sys.exit(main()), where main returns Tally.summary()."""
    try:
        sys.exit(main())
    except Exception:
        traceback.print_exc()
        print("0 passed, 1 failed")
        sys.exit(1)
