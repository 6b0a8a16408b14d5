"""A free TCP port for a job's scheduler that the kernel will not hand to another process
before the scheduler binds it.

The launcher picks the port and the scheduler binds it later, in another process. A port
the kernel chose (a bind to port 0) lies in net.ipv4.ip_local_port_range, the range it
also takes from for every other bind to port 0 and for the local end of every outgoing
connection: in between, a server or worker of another job on the host, or any client,
can be handed the same port, and the scheduler then fails with "Address already in
use". So the port is picked at random below that range, where only processes that name a
port bind, and checked free there on every address of the host (a scheduler may bind
0.0.0.0).
"""
import errno
import random
import socket

# The lowest port picked: below it lie well-known and registered services' ports.
LOWEST = 10000
ATTEMPTS = 200
RANGE_FILE = "/proc/sys/net/ipv4/ip_local_port_range"
# Errors that say a port is not free (another process has it, or it is reserved).
TAKEN = (errno.EADDRINUSE, errno.EACCES)


def kernel_range(path=RANGE_FILE):
    """(first, last) of the ports the kernel hands out on its own, or None when unknown."""
    try:
        with open(path) as f:
            first, last = (int(x) for x in f.read().split())
        return first, last
    except (OSError, ValueError):
        return None


def bindable(address, port):
    """Whether a TCP socket can bind (address, port) now; address is numeric. Raises
    OSError for errors other than a taken port."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        try:
            s.bind((address, port))
        except OSError as e:
            if e.errno in TAKEN:
                return False
            raise
    return True


def free_port(host, path=RANGE_FILE, rng=random):
    """A port free now on host and on every address of this host, below the kernel's own
    range when that range leaves room (else one the kernel picks). Raises OSError at once
    when host does not resolve or cannot be bound at all."""
    address = socket.getaddrinfo(host, None, socket.AF_INET, socket.SOCK_STREAM)[0][4][0]
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.bind((address, 0))  # not this host's address: an error here, once
        kernel_pick = s.getsockname()[1]
    taken = kernel_range(path)
    if taken is not None and taken[0] > LOWEST + ATTEMPTS:
        for _ in range(ATTEMPTS):
            port = rng.randrange(LOWEST, taken[0])
            if bindable("0.0.0.0", port) and bindable(address, port):
                return port
    return kernel_pick
