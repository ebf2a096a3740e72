"""What the CLI test scripts share: record a failed expectation and print it, and exit with their count."""
import sys

failures = []


def check(ok, what):
    if not ok:
        failures.append(what)
        print("FAIL " + what)


def finish(summary):
    """Prints `summary` with the number of failures and exits 1 if there were any."""
    print(f"{summary}{len(failures)} failure(s)")
    sys.exit(1 if failures else 0)
