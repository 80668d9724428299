"""Unit tests of wirelens_helpers.supervise: one process supervisor for the stack, the cluster and the benchmarks."""

from __future__ import annotations

import os
import socket
import sys

import pytest

from wirelens_helpers import supervise
from wirelens_helpers.supervise import Supervised, SupervisorError

# A program that says it is up, starts a child in its own process group, and waits.
PARENT_AND_CHILD = ("import subprocess, sys, time; "
                    "subprocess.Popen([sys.executable, '-c', 'import time; time.sleep(600)']); "
                    "print('up', flush=True); time.sleep(600)")


def log_says(path, text):
    return lambda: path.exists() and text in path.read_text()


def test_a_taken_port_names_the_owner_the_setting_and_the_holder():
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        sock.listen()
        port = sock.getsockname()[1]
        assert supervise.tcp_open(port)()
        with pytest.raises(SupervisorError) as error:
            supervise.check_port_free(port, "WIRELENS_ENVOY_PORT", "envoy")
    assert str(error.value).startswith(f"envoy: port {port} (WIRELENS_ENVOY_PORT) is already taken by "
                                       f"pid {os.getpid()} (")
    assert str(error.value).endswith("Stop that process or choose another port: WIRELENS_ENVOY_PORT=NNNN make up")

    class Mine(Exception):
        pass
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        sock.listen()
        with pytest.raises(Mine):
            supervise.check_port_free(sock.getsockname()[1], "X_PORT", "x", error=Mine)


def test_start_ready_and_stop_reach_the_whole_process_group(tmp_path):
    program = Supervised("sleeper", [sys.executable, "-c", PARENT_AND_CHILD], tmp_path / "logs" / "sleeper.log",
                         pid_file=tmp_path / "pids" / "sleeper.pid")
    program.start()
    program.wait_ready(log_says(program.log, "up"), timeout_s=30, interval_s=0.02)
    assert supervise.read_pid(program.pid_file) == program.pid and program.alive()
    assert supervise.group_alive(program.pid)
    program.stop(grace_s=10)
    assert not supervise.group_alive(program.pid), "the child outlived its parent"
    assert not program.pid_file.exists() and not program.alive()


def test_a_pid_file_stops_and_kills_from_elsewhere(tmp_path):
    for act, said in ((supervise.stop_pid_file, "stopped"), (supervise.kill_pid_file, "killed")):
        program = Supervised("sleeper", [sys.executable, "-c", PARENT_AND_CHILD], tmp_path / "sleeper.log",
                             pid_file=tmp_path / "sleeper.pid", log_mode="rotate")
        program.start()
        program.wait_ready(log_says(program.log, "up"), timeout_s=30, interval_s=0.02)
        assert act(program.pid_file) == f"{said} pid {program.pid}"
        program.process.wait(timeout=30)
        assert not supervise.group_alive(program.pid)
        assert act(program.pid_file) == "not running"
    assert (tmp_path / "sleeper.log.1").exists(), "rotate keeps the previous run's log"


def test_a_pid_file_of_another_program_is_not_ours(tmp_path):
    pid_file = tmp_path / "x.pid"
    supervise.write_pid(pid_file, os.getpid(), "/no/such/program")
    assert supervise.read_pid(pid_file) is None


def test_a_program_that_exits_fails_at_once_with_its_status_and_log(tmp_path):
    program = Supervised("broken", [sys.executable, "-c", "print('bad flag'); raise SystemExit(4)"],
                         tmp_path / "broken.log")
    program.start()
    with pytest.raises(SupervisorError) as error:
        program.wait_ready(lambda: False, timeout_s=60, interval_s=0.02, detail="port 1, X_PORT")
    assert str(error.value) == (f"broken exited with status 4 (port 1, X_PORT); log: {tmp_path / 'broken.log'}\n"
                                "--- last lines of broken.log ---\nbad flag")


def test_a_program_that_never_answers_fails_after_the_deadline_and_is_signalled_alone(tmp_path):
    program = Supervised("silent", [sys.executable, "-c", "import time; time.sleep(600)"], tmp_path / "silent.log",
                         new_session=False)
    program.start()
    assert os.getpgid(program.pid) == os.getpgid(0)
    with pytest.raises(SupervisorError, match=r"^silent not ready after 0s; log: "):
        program.wait_ready(lambda: False, timeout_s=0.1, interval_s=0.02)
    program.kill()
    assert program.process.returncode == -9
