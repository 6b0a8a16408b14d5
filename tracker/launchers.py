"""The remote launchers of tracker/launch: host files, addresses, and the command
lines that start nodes through ssh, mpirun and srun.

Every remote node runs under tracker/node_entry.py on its host; this module only
builds what the launcher runs here. Standard library only.
"""

import fcntl
import functools
import ipaddress
import os
import shlex
import socket
import struct
import subprocess

HERE = os.path.dirname(os.path.abspath(__file__))
ENTRY = os.path.join(HERE, "node_entry.py")
REMOTE_PYTHON = "python3"

# Run on the remote host as `python3 -c LOADER ARGS`: reads node_entry.py's source
# from stdin (a byte count, a newline, the source) and runs it, which then reads the
# job's environment from the same stdin.
LOADER = ('import sys;b=sys.stdin.buffer;'
          'exec(compile(b.read(int(b.readline())),"herdps-node-entry","exec"))')

# Where mpirun implementations put a process's rank, in the order they are tried.
# SLURM_PROCID is left out on purpose: mpirun inside an allocation inherits the batch
# step's SLURM_PROCID=0.
MPI_RANK_VARS = ("OMPI_COMM_WORLD_RANK", "PMIX_RANK", "PMI_RANK")
SLURM_RANK_VARS = ("SLURM_PROCID",)


class HostFileError(ValueError):
    pass


def read_host_file(path):
    """The hosts of a host file, in order: the first word of each line, without the
    ':N' of MPICH's 'host:N'; '#' starts a comment; words after the first (Open MPI's
    'slots=N') are ignored, so one file serves ssh and mpirun. Raises HostFileError."""
    try:
        with open(path, encoding="utf-8") as f:
            lines = f.read().splitlines()
    except (OSError, UnicodeDecodeError) as e:
        raise HostFileError(f"cannot read host file {path}: {e}") from None
    hosts = []
    for line in lines:
        words = line.split("#", 1)[0].split()
        if words:
            host, _, slots = words[0].rpartition(":")
            hosts.append(host if host and slots.isdigit() else words[0])
    if not hosts:
        raise HostFileError(f"host file {path} names no host")
    return hosts


@functools.lru_cache(maxsize=None)
def resolve_ipv4(host):
    """The IPv4 address of host ('user@' stripped) as this host resolves it, or
    None."""
    name = host.rpartition("@")[2]
    try:
        return socket.getaddrinfo(name, None, socket.AF_INET, socket.SOCK_STREAM)[0][4][0]
    except (OSError, IndexError):
        return None


def is_loopback(address):
    return ipaddress.ip_address(address).is_loopback


def source_address_towards(address):
    """This host's address on the route to address (no packet is sent)."""
    with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as s:
        s.connect((address, 9))
        return s.getsockname()[0]


def _ifreq(sock, request, name):
    return fcntl.ioctl(sock.fileno(), request, struct.pack("256s", name.encode()[:15]))


def interface_address(name):
    """The IPv4 address of network interface name on this host, or None; the same
    address a node's runtime picks for PS_INTERFACE."""
    with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as s:
        try:
            return socket.inet_ntoa(_ifreq(s, 0x8915, name)[20:24])  # SIOCGIFADDR
        except OSError:
            return None


def first_external_address():
    """This host's first non-loopback IPv4 address on an interface that is up (as the
    runtime picks when neither PS_NODE_HOST nor PS_INTERFACE is set), or None."""
    with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as s:
        for _, name in socket.if_nameindex():
            try:
                flags = struct.unpack("H", _ifreq(s, 0x8913, name)[16:18])[0]  # SIOCGIFFLAGS
            except OSError:
                continue
            if flags & 0x1 and not flags & 0x8:  # IFF_UP, not IFF_LOOPBACK
                address = interface_address(name)
                if address:
                    return address
    return None


def scheduler_address_here(hosts):
    """The address of this host that nodes on hosts (or anywhere, when hosts is
    empty) can reach: the one on the route to the first host that is not a loopback
    address, else this host's first external address; 127.0.0.1 when every host is
    this one."""
    addresses = [a for a in map(resolve_ipv4, hosts) if a]
    remote = [a for a in addresses if not is_loopback(a)]
    if remote:
        return source_address_towards(remote[0])
    if hosts and len(addresses) == len(hosts):
        return "127.0.0.1"
    return first_external_address() or "127.0.0.1"


def place_round_robin(count, hosts, start=0):
    """Host of each of count nodes: node i on hosts[(start + i) % len(hosts)]."""
    return [hosts[(start + i) % len(hosts)] for i in range(count)]


def ssh_argv(ssh_command, host, workdir, label, grace, command):
    """The command line that runs command on host under node_entry.py, reading the
    entry's source and the environment from stdin (ssh_stdin)."""
    remote = ["cd", workdir]
    entry = [REMOTE_PYTHON, "-c", LOADER, "--env-on-stdin", "--label", label,
             "--host-label", host, "--grace", f"{grace:g}", "--", *command]
    return [*ssh_command, host, f"{shlex.join(remote)} && exec {shlex.join(entry)}"]


def ssh_stdin(env):
    """The bytes the launcher writes to ssh: node_entry.py's source, then env."""
    with open(ENTRY, "rb") as f:
        source = f.read()
    records = b"".join(f"{k}={v}".encode("utf-8", "surrogateescape") + b"\0"
                       for k, v in env.items())
    return b"%d\n%s%d\n%s" % (len(source), source, len(records), records)


def rank_entry_argv(rank_vars, servers, processes, grace, command):
    """The per-rank command mpirun / srun start on every host (node_entry.py must be
    at the same path there, as the node command must)."""
    return [REMOTE_PYTHON, ENTRY, "--rank-vars", ",".join(rank_vars),
            "--servers", str(servers), "--processes", str(processes),
            "--grace", f"{grace:g}", "--", *command]


def mpi_flavour(mpirun_command):
    """'openmpi', 'mpich' (also Intel MPI's Hydra) or 'unknown', from --version."""
    try:
        out = subprocess.run([*mpirun_command, "--version"], capture_output=True,
                             text=True, timeout=20, stdin=subprocess.DEVNULL)
        text = out.stdout + out.stderr
    except (OSError, subprocess.SubprocessError):
        return "unknown"
    if "Open MPI" in text or "OpenRTE" in text:
        return "openmpi"
    if "HYDRA" in text or "MPICH" in text or "Intel" in text:
        return "mpich"
    return "unknown"


def mpirun_argv(mpirun_command, flavour, processes, hostfile, env_names, entry):
    """mpirun's command line. Open MPI does not hand the environment to other hosts
    unless told: every job variable goes by name with -x (the value stays in
    mpirun's environment, never on the command line). Hydra hands it all over by
    default. Open MPI also gets --oversubscribe (nodes are not pinned to cores, so
    more of them than slots is fine) and, as root, --allow-run-as-root."""
    argv = [*mpirun_command, "-np", str(processes)]
    if flavour == "openmpi":
        if os.geteuid() == 0:
            argv.append("--allow-run-as-root")
        argv.append("--oversubscribe")
        for name in sorted(env_names):
            argv += ["-x", name]
    if hostfile:
        argv += ["-f" if flavour == "mpich" else "--hostfile", hostfile]
    return argv + entry


def srun_argv(srun_command, processes, entry):
    """srun's command line: one task per node process, the whole environment passed
    (also where SLURM_EXPORT_ENV says otherwise), and the step ended as soon as one
    task fails."""
    return [*srun_command, f"--ntasks={processes}", "--export=ALL",
            "--kill-on-bad-exit=1", *entry]
