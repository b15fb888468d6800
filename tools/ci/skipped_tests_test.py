#!/usr/bin/env python3
"""skipped_tests_test.py SKIPPED_TESTS GTEST_FIXTURE GENERATE_XML: skipped_tests.py on
a bazel-testlogs tree built from the real formats: the test.xml that this machine's
GoogleTest writes (GTEST_FIXTURE: one test passing, one skipping, one disabled) and the
test.xml that Bazel's own generate-xml.sh writes for a test that writes none (a shell
test printing the skip marker, in a shard directory, and one that skips nothing)."""
import os
import subprocess
import sys
import tempfile

failures = []


def check(what, got, want):
    if got != want:
        failures.append(f"{what}:\n  got:  {got!r}\n  want: {want!r}")


def run(script, testlogs, allowed_text, tmp):
    allowed = os.path.join(tmp, "allowed_skips.txt")
    with open(allowed, "w") as f:
        f.write(allowed_text)
    r = subprocess.run([sys.executable, script, testlogs, allowed], capture_output=True,
                       text=True)
    return r.returncode, r.stdout.splitlines()


def shell_xml(generate_xml, tmp, xml_path, log_text):
    os.makedirs(os.path.dirname(xml_path), exist_ok=True)
    log = os.path.join(tmp, "test.log")
    with open(log, "w") as f:
        f.write(log_text)
    subprocess.run(["bash", generate_xml, log, xml_path, "1", "0"], check=True)


def main(argv):
    script, fixture, generate_xml = argv[1:4]
    with tempfile.TemporaryDirectory() as tmp:
        logs = os.path.join(tmp, "testlogs")
        gtest_xml = os.path.join(logs, "kernels/gemv/gemm_test/test.xml")
        os.makedirs(os.path.dirname(gtest_xml))
        subprocess.run([fixture, "--gtest_output=xml:" + gtest_xml], check=True,
                       stdout=subprocess.DEVNULL)
        shell_xml(generate_xml, tmp, os.path.join(logs, "tests/render/render_test/shard_2_of_3/test.xml"),
                  "checking the charts\n[  SKIPPED ] screenshot no display here\ndone\n")
        shell_xml(generate_xml, tmp, os.path.join(logs, "tests/render/quiet_test/test.xml"),
                  "a line that mentions [  SKIPPED ] in passing\nall good\n")

        gemm = "//kernels/gemv:gemm_test Fixture.Skips"
        shell = "//tests/render:render_test screenshot"
        rc, out = run(script, logs, f"{gemm}  # reviewed\n", tmp)
        check("one skip allowed, one not: exit", rc, 1)
        check("one skip allowed, one not: output", out, [
            "SKIPPED //kernels/gemv:gemm_test Fixture.Skips: no such feature here",
            "SKIPPED //tests/render:render_test screenshot: no display here  "
            f"(not allowed: not in {os.path.join(tmp, 'allowed_skips.txt')})",
            "skipped: 2, not allowed: 1",
        ])

        rc, out = run(script, logs, f"# reviewed skips\n{gemm}  # reviewed\n{shell}  # too\n", tmp)
        check("both allowed: exit", rc, 0)
        check("both allowed: last line", out[-1:], ["skipped: 2, not allowed: 0"])

        rc, out = run(script, logs, f"{gemm}\n{shell}  # reviewed\n", tmp)
        check("an entry without its reason: exit", rc, 1)
        check("an entry without its reason: last line", out[-1:], ["skipped: 0, not allowed: 1"])

        rc, out = run(script, os.path.join(tmp, "missing"), "", tmp)
        check("no testlogs directory: exit", rc, 1)

        with open(os.path.join(logs, "tests/render/quiet_test/test.xml"), "a") as f:
            f.write("<testsuite>")  # a report cut short
        rc, out = run(script, logs, f"{gemm}  # reviewed\n{shell}  # too\n", tmp)
        check("an unreadable test.xml: exit", rc, 1)

    if failures:
        print("skipped_tests_test: FAIL")
        for f in failures:
            print(f)
        return 1
    print("skipped_tests_test: PASS")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
