"""What every GPU test script here shares: one PASS/FAIL line per check,
the closing `N passed, N failed` that scripts/gpu-tests.sh adds up, and the
exit status (an exception counts as a failure, never as a pass)."""
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


def run(main):
    """sys.exit(main()), where main returns Tally.summary()."""
    try:
        sys.exit(main())
    except Exception:
        traceback.print_exc()
        print("0 passed, 1 failed")
        sys.exit(1)
