"""Three hosts (or as many as asked) and a switch on one machine, made of Linux network
namespaces, for netns_test.py and the `cuts` fault schedule.

The namespaces herdps-<pid>-a, -b and -c are the hosts, each with loopback and one
interface, herd0, holding 10.213.N.1, .2 or .3/24; a veth pair cables each host to a
bridge, switch, in another namespace, herdps-<pid>-hub. <pid> is the process that
made them, N a /24 that no address or route of the root namespace overlaps, whose
interfaces are never touched. Needs root and iproute2; standard library only.
"""

import ipaddress
import os
import re
import shlex
import shutil
import signal
import subprocess
import time

HOSTS = ("a", "b", "c")
HOST_IF = "herd0"           # each host's interface
PREFIX = "herdps-"          # namespaces are PREFIX<pid>-<host or hub>
OWNED = re.compile(r"herdps-(\d+)-(?:[a-z]|hub)$")


class Skip(Exception):
    """The network cannot be made here; the message says why."""


def ip(*args, check=True):
    """Runs `ip ARGS`; returns its stdout. Raises RuntimeError with ip's message."""
    r = subprocess.run(["ip", *args], capture_output=True, text=True, timeout=30)
    if check and r.returncode != 0:
        raise RuntimeError(f"`ip {shlex.join(args)}` failed: {r.stderr.strip()}")
    return r.stdout


def namespace_pids(name):
    try:
        return [int(p) for p in ip("netns", "pids", name, check=False).split()]
    except (RuntimeError, subprocess.SubprocessError):
        return []


def delete_namespace(name):
    """Kills every process in namespace name, then deletes it (a namespace that still
    holds a process would outlive its name)."""
    deadline = time.monotonic() + 5
    while True:
        pids = namespace_pids(name)
        if not pids or time.monotonic() > deadline:
            break
        for pid in pids:
            try:
                os.kill(pid, signal.SIGKILL)
            except OSError:
                pass
        time.sleep(0.05)
    ip("netns", "del", name, check=False)


def pid_alive(pid):
    try:
        os.kill(pid, 0)
        return True
    except ProcessLookupError:
        return False
    except PermissionError:
        return True


def delete_orphaned_namespaces():
    """Namespaces of earlier runs whose driver is gone (killed by SIGKILL, as ctest
    does on its TIMEOUT)."""
    for line in ip("netns", "list", check=False).splitlines():
        words = line.split()
        m = OWNED.match(words[0]) if words else None
        if m and int(m.group(1)) != os.getpid() and not pid_alive(int(m.group(1))):
            print(f"deleting {words[0]}, left by an earlier run")
            delete_namespace(words[0])


def free_subnet():
    """A /24 of 10.213.0.0/16 that no address or route of the root namespace overlaps
    (the default route aside), so that these hosts cannot be mistaken for real ones."""
    used = []
    for line in ip("-4", "-o", "addr", "show").splitlines():
        words = line.split()
        if "inet" in words:
            used.append(ipaddress.ip_interface(words[words.index("inet") + 1]).network)
    for line in ip("-4", "route", "show", "table", "all").splitlines():
        words = line.split()
        if words and words[0] in ("unicast", "local", "broadcast", "multicast", "anycast",
                                  "unreachable", "blackhole", "prohibit", "throw", "nat"):
            words = words[1:]
        if words and words[0] != "default":
            try:
                used.append(ipaddress.ip_network(words[0], strict=False))
            except ValueError:
                pass
    start = os.getpid() % 250
    for i in range(250):
        subnet = ipaddress.ip_network(f"10.213.{(start + i) % 250 + 1}.0/24")
        if not any(subnet.overlaps(u) for u in used):
            return subnet
    raise Skip("every 10.213.N.0/24 overlaps an address or route of this host")


class Network:
    """Hosts (HOSTS unless given: single letters) and a switch, each a network namespace
    of this run. create() builds it (raises Skip when this machine cannot), close()
    removes it and every process in it; close() may be called any number of times."""

    def __init__(self, hosts=HOSTS):
        stem = f"{PREFIX}{os.getpid()}-"
        self.hosts = tuple(hosts)
        self.hub = stem + "hub"
        self.namespace = {h: stem + h for h in self.hosts}
        self.address = {}
        self.made = []  # namespaces to delete, in the order they were made

    def create(self):
        if os.geteuid() != 0:
            raise Skip("network namespaces need root (this runs as uid "
                       f"{os.geteuid()})")
        if shutil.which("ip") is None:
            raise Skip("no `ip` command: install iproute2")
        delete_orphaned_namespaces()
        subnet = free_subnet()
        for name in (self.hub, *self.namespace.values()):
            try:
                ip("netns", "add", name)
            except RuntimeError as e:
                raise Skip(f"cannot make a network namespace: {e}") from None
            self.made.append(name)
        try:
            ip("-n", self.hub, "link", "add", "switch", "type", "bridge")
            ip("-n", self.hub, "link", "set", "switch", "up")
            for i, host in enumerate(self.hosts):
                ns, port = self.namespace[host], self.port(host)
                self.address[host] = str(subnet.network_address + i + 1)
                ip("-n", self.hub, "link", "add", port, "type", "veth", "peer", "name",
                   HOST_IF, "netns", ns)
                ip("-n", self.hub, "link", "set", port, "master", "switch")
                ip("-n", self.hub, "link", "set", port, "up")
                ip("-n", ns, "link", "set", "lo", "up")
                ip("-n", ns, "addr", "add", f"{self.address[host]}/{subnet.prefixlen}",
                   "dev", HOST_IF)
                ip("-n", ns, "link", "set", HOST_IF, "up")
        except RuntimeError as e:
            raise Skip(f"cannot cable the hosts: {e}") from None
        print(f"network: switch {self.hub}; " + ", ".join(
            f"host {h} {self.namespace[h]} {self.address[h]}" for h in self.hosts))

    @staticmethod
    def port(host):
        return f"port-{host}"  # the switch's end of host's cable

    def cut(self, host):
        """Pulls host's cable: its port on the switch goes down, the host itself is
        left as it is (its interface loses its carrier)."""
        ip("-n", self.hub, "link", "set", self.port(host), "down")

    def restore(self, host):
        """Plugs host's cable back in."""
        ip("-n", self.hub, "link", "set", self.port(host), "up")

    def pids(self):
        """{namespace: [pid, ...]} of the namespaces that still hold processes."""
        found = {name: namespace_pids(name) for name in self.made}
        return {name: pids for name, pids in found.items() if pids}

    def ssh_map(self):
        """HERDPS_NETNS_HOSTS for netns_ssh."""
        return " ".join(f"{self.address[h]}={self.namespace[h]}" for h in self.hosts)

    def close(self):
        while self.made:
            delete_namespace(self.made.pop())
