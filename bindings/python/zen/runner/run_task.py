"""The rank side of zen.run (run_func.py): `python3 -m zen.runner.run_task`.

The function, its arguments and keyword arguments come cloudpickled and base64-encoded in
the environment, split over ZENRUN_TASK_0, ZENRUN_TASK_1, ... (one variable may hold at most
128 KiB on Linux). The environment is how zenrun already carries a rank's settings to every
host (exec locally, the wrapper's stdin line through ssh, mpirun's -x), so the function needs
no channel of its own. The variables are removed before the function runs, so processes it
starts do not inherit them.

The outcome goes back on stdout, which zenrun reads anyway, as one line

    ZENRUN_TASK_RESULT <token> <base64 of the cloudpickled outcome>

written after the function's own output; the caller's Output recognises it by the per-job
token and keeps it from the printed output. The outcome is {"value": ...} or, when the
function raised, {"error": the exception pickled on its own (None when it cannot be), "type",
"message", "traceback"}; the rank then exits with code 1, so that zenrun stops the others.
"""

import base64
import os
import sys
import traceback

TASK_PREFIX = "ZENRUN_TASK_"
TOKEN_VARIABLE = TASK_PREFIX + "TOKEN"
CHUNKS_VARIABLE = TASK_PREFIX + "CHUNKS"
RESULT_PREFIX = TASK_PREFIX + "RESULT"


def result_line(token, payload):
    return f"{RESULT_PREFIX} {token} ".encode() + base64.b64encode(payload) + b"\n"


def parse_result_line(line, token):
    """(the output before it, the pickled outcome) when `line` holds a result line of this
    job's token, else None. It may follow output the function left without a newline."""
    head = f"{RESULT_PREFIX} {token} ".encode()
    at = line.find(head)
    if at < 0:
        return None
    return line[:at], base64.b64decode(line[at + len(head):].rstrip(b"\r\n"))


def _take_task():
    count = int(os.environ.pop(CHUNKS_VARIABLE))
    text = "".join(os.environ.pop(f"{TASK_PREFIX}{i}") for i in range(count))
    return base64.b64decode(text)


def _failure(cloudpickle, error):
    """The outcome of a raised `error`; the exception pickled apart, so that the caller still
    gets its text where the exception itself does not pickle or unpickle."""
    try:
        pickled = cloudpickle.dumps(error)
    except Exception:
        pickled = None
    return cloudpickle.dumps({"error": pickled, "type": type(error).__name__,
                              "message": str(error), "traceback": traceback.format_exc()})


def main():
    import cloudpickle  # where it is missing, the traceback on stderr says so

    token = os.environ.pop(TOKEN_VARIABLE)
    try:
        func, args, kwargs = cloudpickle.loads(_take_task())
        payload = cloudpickle.dumps({"value": func(*args, **kwargs)})
        code = 0
    except Exception as e:  # the function's, or its result's pickling, or the loading
        payload = _failure(cloudpickle, e)
        code = 1
    sys.stdout.flush()
    sys.stdout.buffer.write(result_line(token, payload))
    sys.stdout.flush()
    return code


if __name__ == "__main__":
    sys.exit(main())
