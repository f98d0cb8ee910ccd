"""``python -I -S tests/launch.py ADDRESS MODULE ARGS``: ``python -m MODULE ARGS``, forked by
the test worker's forking interpreter listening at ADDRESS (``@NAME``: an abstract one; see
:mod:`tests.commands`), for a command line given to code that starts its process itself
(the MCP SDK's stdio client, a test's own ``subprocess.Popen``).

This process hands its standard streams, working directory and environment to the forked
command, passes on the signals it is sent, and ends as the command ended: with its status,
or by the same signal. Killed itself (SIGKILL), the forking interpreter kills the command.
When the command cannot be forked (its environment sets what an interpreter reads as it
starts otherwise, or no forking interpreter answers), this process becomes a fresh
``python -m MODULE ARGS``. Only the standard library is imported, without ``site``: it
starts in a few milliseconds."""

import contextlib
import json
import os
import signal
import socket
import sys

_PASSED_ON = (signal.SIGINT, signal.SIGTERM, signal.SIGHUP, signal.SIGQUIT, signal.SIGUSR1,
              signal.SIGUSR2)


def main() -> None:
    address, module, args = sys.argv[1], sys.argv[2], sys.argv[3:]
    if address.startswith("@"):  # an abstract address, as ss(8) writes it
        address = "\0" + address[1:]
    asked = {"module": module, "args": args, "cwd": os.getcwd(), "env": dict(os.environ)}
    answer = {}
    try:
        channel = socket.socket(socket.AF_UNIX, socket.SOCK_SEQPACKET)
        channel.connect(address)
        socket.send_fds(channel, [json.dumps(asked).encode()], [0, 1, 2])
        answer = json.loads(channel.recv(1 << 16) or b"{}")
    except OSError:
        pass
    if "pid" not in answer:
        os.execv(sys.executable, [sys.executable, "-m", module, *args])
    pid = int(answer["pid"])
    # The streams are the command's alone now: a reader of its output sees the end of it
    # when the command closes it, not when this process ends too
    null = os.open(os.devnull, os.O_RDWR)
    for fd in (0, 1, 2):
        os.dup2(null, fd)
    os.close(null)
    for signum in _PASSED_ON:
        signal.signal(signum, lambda signum, frame: os.kill(pid, signum))
    ended = json.loads(channel.recv(1 << 16) or b'{"status": 1}')  # none: it was lost
    status = int(ended["status"])
    if status < 0:  # ended by a signal: so is this process
        with contextlib.suppress(OSError):  # SIGKILL's cannot be changed
            signal.signal(-status, signal.SIG_DFL)  # SIGPIPE's, ignored by Python, too
        os.kill(os.getpid(), -status)
    sys.exit(status)


if __name__ == "__main__":
    main()
