#!/usr/bin/env python3
"""tracker/ports.py: the scheduler's port is picked below the kernel's own port range, free
when picked, and a kernel-picked port only where that range leaves no room."""
import os
import random
import socket
import sys
import tempfile
import unittest

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..",
                                "tracker"))
import ports  # noqa: E402


class Scripted:
    """A stand-in for random: randrange answers from a list, then from the real one."""

    def __init__(self, answers):
        self.answers = list(answers)
        self.asked = []

    def randrange(self, lo, hi):
        self.asked.append((lo, hi))
        return self.answers.pop(0) if self.answers else random.randrange(lo, hi)


class FreePortTest(unittest.TestCase):
    def range_file(self, text):
        f = tempfile.NamedTemporaryFile("w", delete=False)
        f.write(text)
        f.close()
        self.addCleanup(os.unlink, f.name)
        return f.name

    def test_picks_below_the_kernel_range_and_the_port_is_free(self):
        path = self.range_file("40000\t60999\n")
        for _ in range(20):
            port = ports.free_port("127.0.0.1", path=path)
            self.assertGreaterEqual(port, ports.LOWEST)
            self.assertLess(port, 40000)
            self.assertTrue(ports.bindable("127.0.0.1", port))

    def test_skips_a_port_that_is_taken(self):
        path = self.range_file("40000 60999")
        with socket.socket() as taken:
            taken.bind(("127.0.0.1", 0))
            taken.listen()
            busy = taken.getsockname()[1]
            # The range file is fake, so the busy port may be anywhere: pick it first.
            rng = Scripted([busy])
            port = ports.free_port("127.0.0.1", path=path, rng=rng)
            self.assertNotEqual(port, busy)
            self.assertGreaterEqual(len(rng.asked), 2)  # the busy one, then others
            self.assertEqual(rng.asked[0], (ports.LOWEST, 40000))

    def test_the_kernel_picks_when_its_range_leaves_no_room_below(self):
        path = self.range_file("1024 65535")
        rng = Scripted([])
        port = ports.free_port("127.0.0.1", path=path, rng=rng)
        self.assertEqual(rng.asked, [])
        self.assertTrue(0 < port < 65536)

    def test_the_kernel_picks_when_its_range_is_unknown(self):
        for text in ("", "not numbers", "1 2 3"):
            rng = Scripted([])
            port = ports.free_port("127.0.0.1", path=self.range_file(text), rng=rng)
            self.assertEqual(rng.asked, [], text)
            self.assertTrue(0 < port < 65536)
        rng = Scripted([])
        ports.free_port("127.0.0.1", path="/nonexistent/range", rng=rng)
        self.assertEqual(rng.asked, [])

    def test_a_name_that_does_not_resolve_is_an_error_before_any_port_is_tried(self):
        rng = Scripted([])
        with self.assertRaises(OSError):
            ports.free_port("no-such-host.invalid", path=self.range_file("40000 60999"),
                            rng=rng)
        self.assertEqual(rng.asked, [])

    def test_an_address_this_host_lacks_is_an_error_before_any_port_is_tried(self):
        rng = Scripted([])
        try:
            port = ports.free_port("192.0.2.1", path=self.range_file("40000 60999"), rng=rng)
        except OSError:
            self.assertEqual(rng.asked, [])
            return
        self.skipTest(f"this host binds addresses it lacks (ip_nonlocal_bind): got {port}")

    def test_a_name_is_resolved_to_its_address(self):
        port = ports.free_port("localhost", path=self.range_file("40000 60999"))
        self.assertTrue(ports.LOWEST <= port < 40000)

    def test_the_port_the_launcher_gets_is_outside_this_hosts_kernel_range(self):
        found = ports.kernel_range()
        if found is None or found[0] <= ports.LOWEST + ports.ATTEMPTS:
            self.skipTest(f"this host's kernel range {found} leaves no room below it")
        for _ in range(20):
            port = ports.free_port("127.0.0.1")
            self.assertTrue(ports.LOWEST <= port < found[0], (port, found))


if __name__ == "__main__":
    unittest.main()
