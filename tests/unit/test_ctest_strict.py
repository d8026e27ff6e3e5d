#!/usr/bin/env python3
"""unit: scripts/ctest-strict on a throw-away CMake project: a test that is skipped (ctest
SKIP_RETURN_CODE, a failed fixture, disabled) or passes while skipping inside (unittest
skipped=N, a SKIP: line) fails the run, by name; an allow-listed one with its reason does not;
a clean run passes."""
import os
import subprocess
import tempfile
import unittest

STRICT = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "scripts", "ctest-strict")
PROJECT = """cmake_minimum_required(VERSION 3.21)
project(strict NONE)
enable_testing()
add_test(NAME clean COMMAND sh -c "echo skip_link_pause is a name, not a skip")
add_test(NAME rc77 COMMAND sh -c "exit 77")
set_tests_properties(rc77 PROPERTIES SKIP_RETURN_CODE 77)
add_test(NAME setup COMMAND false)
set_tests_properties(setup PROPERTIES FIXTURES_SETUP fx)
add_test(NAME needs_setup COMMAND true)
set_tests_properties(needs_setup PROPERTIES FIXTURES_REQUIRED fx)
add_test(NAME off COMMAND true)
set_tests_properties(off PROPERTIES DISABLED TRUE)
add_test(NAME unittest_skip COMMAND sh -c "echo 'Ran 2 tests' >&2; echo 'OK (skipped=1)' >&2")
add_test(NAME script_skip COMMAND sh -c "echo 'SKIP: no root'")
"""


class CtestStrict(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        cls.tmp = tempfile.TemporaryDirectory(prefix="ctest-strict-")
        src, cls.build = os.path.join(cls.tmp.name, "src"), os.path.join(cls.tmp.name, "build")
        os.makedirs(src)
        with open(os.path.join(src, "CMakeLists.txt"), "w") as f:
            f.write(PROJECT)
        subprocess.run(["cmake", "-S", src, "-B", cls.build], check=True, capture_output=True)
        cls.allow = os.path.join(cls.tmp.name, "allowed.txt")

    @classmethod
    def tearDownClass(cls):
        cls.tmp.cleanup()

    def strict(self, regex, allow=""):
        with open(self.allow, "w") as f:
            f.write("# comment\n" + allow)
        p = subprocess.run([STRICT, "-R", regex], cwd=self.build, capture_output=True, text=True,
                           env=dict(os.environ, CTEST_STRICT_ALLOW=self.allow))
        return p.returncode, p.stdout + p.stderr

    def test_clean_run_passes(self):
        rc, out = self.strict("^clean$")
        self.assertEqual(rc, 0, out)
        self.assertNotIn("did not run", out)

    def test_each_kind_of_skip_fails_by_name(self):
        for name, why in [("rc77", "SKIP_RETURN_CODE=77"), ("needs_setup", "Fixture dependency failed"),
                          ("off", "disabled"), ("unittest_skip", "OK (skipped=1)"), ("script_skip", "SKIP: no root")]:
            with self.subTest(name=name):
                rc, out = self.strict(f"^(clean|{name}|setup)$" if name == "needs_setup" else f"^(clean|{name})$")
                self.assertNotEqual(rc, 0, out)
                self.assertIn(f"\t{name} (", out)
                self.assertIn(why, out)

    def test_allow_listed_skip_passes_with_its_reason(self):
        rc, out = self.strict("^(clean|rc77)$", "rc77 the CI machine has no such device\n")
        self.assertEqual(rc, 0, out)
        self.assertIn("rc77 did not run (allowed: the CI machine has no such device)", out)

    def test_allow_list_entry_without_reason_is_an_error(self):
        rc, out = self.strict("^clean$", "rc77\n")
        self.assertNotEqual(rc, 0, out)
        self.assertIn("has no reason", out)


if __name__ == "__main__":
    unittest.main(verbosity=2)
