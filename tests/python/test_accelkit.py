"""Tests of the accelkit Python package against the built libaccelkit (Debian python3)."""
import os
import subprocess
import sys
import unittest

import accelkit
from accelkit import _lib


class TestPackage(unittest.TestCase):
    def test_version_matches_library(self):
        self.assertEqual(accelkit.__version__, "0.1.0")
        self.assertEqual(accelkit.version(), accelkit.__version__)

    def test_sysinfo_fields(self):
        info = accelkit.sysinfo(peak_millis=30)
        self.assertGreaterEqual(info["cores"], 1)
        self.assertIn(info["active_isa"], ("generic", "avx2", "avx512"))
        self.assertGreater(info["fma_peak_gflops_per_core"], 0.5)
        self.assertGreater(info["memcpy_gbps"], 0.1)
        if "avx2" in info["features"] and "fma" in info["features"]:
            self.assertIn(info["best_isa"], ("avx2", "avx512"))

    def test_errors_raise_with_message(self):
        with self.assertRaises(accelkit.AccelkitError) as ctx:
            accelkit.check(_lib.ak_measure_fma_peak(-5, None))
        self.assertEqual(ctx.exception.status, 1)
        self.assertIn("invalid argument", str(ctx.exception))

    def test_bad_isa_is_an_error_not_a_crash(self):
        code = "import accelkit"
        env = dict(os.environ, AK_ISA="bogus")
        proc = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True)
        self.assertNotEqual(proc.returncode, 0)
        self.assertIn("AK_ISA", proc.stderr)


if __name__ == "__main__":
    unittest.main()
