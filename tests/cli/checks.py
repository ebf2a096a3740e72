"""What the CLI test scripts share: record a failed expectation and print it, and exit with their count."""
import sys

failures = []


def check(ok, what):
    if not ok:
        failures.append(what)
        print("FAIL " + what)


def ns(text):
    """A time as ucplan prints it (format_ns: "393 us", "1.20 ms", three digits) in ns."""
    value, unit = text.split()
    return float(value) * {"ns": 1, "us": 1e3, "ms": 1e6, "s": 1e9}[unit]


def finish(summary):
    """Prints `summary` with the number of failures and exits 1 if there were any."""
    print(f"{summary}{len(failures)} failure(s)")
    sys.exit(1 if failures else 0)
