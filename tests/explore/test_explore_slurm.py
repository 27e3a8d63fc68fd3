# SPDX-License-Identifier: MIT
"""The Slurm job-array script of docs/scheduling.md, run for real: a
single-node Slurm cluster (munged, slurmctld, slurmd, a generated
slurm.conf, all in a temporary directory) is brought up on this machine,
the script submits 4 shards of kbthreads-explore as an array and a
dependent merge job, and the merged report must be the report of one local
run with the same options. The cluster is taken down whatever happens.

Debian's slurm-wlm and munge are installed with apt-get when missing (as
root; the Makefile's `deps` installs them too). The daemons run in the
foreground as this test's children, without systemd or cgroups
(proctrack/linuxproc, task/none), as root, the node being `hostname -s` at
127.0.0.1.

Environment as for test_explore.py (tests/explore/CMakeLists.txt).
"""
from __future__ import annotations

import os
import re
import shutil
import signal
import socket
import subprocess
import tempfile
import time

import pytest

EXPLORE = os.environ["KB_EXPLORE"]
TARGET = os.environ["KB_EXPLORE_TARGET"]
DOC = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "docs", "scheduling.md")
DAEMONS = ("/usr/sbin/munged", "/usr/sbin/slurmctld", "/usr/sbin/slurmd", "/usr/bin/sbatch")


def install_slurm() -> None:
    if all(os.path.exists(p) for p in DAEMONS):
        return
    assert os.geteuid() == 0, "Slurm is not installed: sudo apt-get install -y slurm-wlm munge"
    env = dict(os.environ, DEBIAN_FRONTEND="noninteractive")
    subprocess.run(["apt-get", "update", "-qq"], check=True, env=env)
    subprocess.run(["apt-get", "install", "-y", "-qq", "slurm-wlm", "munge"], check=True, env=env,
                   stdout=subprocess.DEVNULL)


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def slurm_conf(d: str, host: str) -> str:
    return f"""ClusterName=kbexplore
SlurmctldHost={host}(127.0.0.1)
SlurmctldPort={free_port()}
SlurmdPort={free_port()}
SlurmUser=root
SlurmdUser=root
AuthType=auth/munge
AuthInfo=socket={d}/munge/munge.socket
CredType=cred/munge
StateSaveLocation={d}/state
SlurmdSpoolDir={d}/spool
SlurmctldPidFile={d}/slurmctld.pid
SlurmdPidFile={d}/slurmd.pid
SlurmctldLogFile={d}/slurmctld.log
SlurmdLogFile={d}/slurmd.log
ProctrackType=proctrack/linuxproc
TaskPlugin=task/none
JobAcctGatherType=jobacct_gather/none
AccountingStorageType=accounting_storage/none
JobCompType=jobcomp/none
MpiDefault=none
SchedulerType=sched/backfill
SelectType=select/cons_tres
SelectTypeParameters=CR_Core
ReturnToService=2
MinJobAge=600
NodeName={host} NodeAddr=127.0.0.1 CPUs={os.cpu_count() or 1} State=UNKNOWN
PartitionName=explore Nodes={host} Default=YES MaxTime=INFINITE State=UP
"""


class Cluster:
    """munged, slurmctld and slurmd as children, with their files in d."""

    def __init__(self, d: str):
        self.d = d
        self.procs: list[subprocess.Popen] = []
        self.env = dict(os.environ, SLURM_CONF=os.path.join(d, "slurm.conf"))

    def start(self, argv: list[str], log: str) -> None:
        with open(os.path.join(self.d, log), "wb") as f:
            self.procs.append(subprocess.Popen(argv, stdout=f, stderr=subprocess.STDOUT, env=self.env,
                                               start_new_session=True))

    def up(self) -> None:
        d = self.d
        for sub in ("munge", "state", "spool"):
            os.makedirs(os.path.join(d, sub), mode=0o700)
        key = os.path.join(d, "munge", "munge.key")
        with open(key, "wb") as f:
            f.write(os.urandom(1024))
        os.chmod(key, 0o400)
        host = socket.gethostname().split(".")[0]
        with open(self.env["SLURM_CONF"], "w") as f:
            f.write(slurm_conf(d, host))
        self.start(["munged", "-F", "--force", f"--socket={d}/munge/munge.socket", f"--key-file={key}",
                    f"--log-file={d}/munge/munged.log", f"--pid-file={d}/munge/munged.pid",
                    f"--seed-file={d}/munge/munged.seed"], "munged.out")
        self.wait_for(lambda: os.path.exists(f"{d}/munge/munge.socket"), "munged's socket")
        self.start(["slurmctld", "-D", "-i", "-f", self.env["SLURM_CONF"]], "slurmctld.out")
        self.start(["slurmd", "-D", "-f", self.env["SLURM_CONF"]], "slurmd.out")
        self.wait_for(lambda: self.slurm(["sinfo", "-h", "-o", "%T"]).stdout.strip() == "idle", "an idle node")

    def wait_for(self, ready, what: str, seconds: float = 120) -> None:
        end = time.monotonic() + seconds
        while not ready():
            for p in self.procs:
                assert p.poll() is None, f"{p.args[0]} exited ({p.returncode}) waiting for {what}\n{self.logs()}"
            assert time.monotonic() < end, f"no {what} after {seconds} s\n{self.logs()}"
            time.sleep(0.5)

    def slurm(self, argv: list[str], **kw) -> subprocess.CompletedProcess:
        return subprocess.run(argv, capture_output=True, text=True, env=self.env, timeout=60, **kw)

    def job(self, job_id: str) -> dict[str, str]:
        text = self.slurm(["scontrol", "-o", "show", "job", job_id]).stdout
        return dict(re.findall(r"(\w+)=(\S*)", text))

    def logs(self) -> str:
        out = []
        for name in ("munged.out", "slurmctld.out", "slurmd.out"):
            try:
                with open(os.path.join(self.d, name), errors="replace") as f:
                    out.append(f"--- {name}\n" + "".join(f.readlines()[-20:]))
            except OSError:
                pass
        return "\n".join(out)

    def down(self) -> None:
        if os.path.exists("/usr/bin/scancel"):
            try:
                self.slurm(["scancel", "--user=root", "--partition=explore"])
            except (OSError, subprocess.TimeoutExpired):
                pass
        for p in reversed(self.procs):  # slurmd, slurmctld, then munged
            if p.poll() is None:
                p.send_signal(signal.SIGTERM)
                try:
                    p.wait(15)
                except subprocess.TimeoutExpired:
                    os.killpg(p.pid, signal.SIGKILL)
                    p.wait()


@pytest.fixture
def cluster():
    install_slurm()
    d = tempfile.mkdtemp(prefix="kb-slurm-")
    c = Cluster(d)
    try:
        c.up()
        yield c
    finally:
        c.down()
        shutil.rmtree(d, ignore_errors=True)


def script_from_doc() -> str:
    """The job-array script of docs/scheduling.md, as printed there."""
    with open(DOC) as f:
        doc = f.read()
    m = re.search(r"```sh\n(#!/bin/sh\n# explore-slurm\.sh .*?)```", doc, re.S)
    assert m, "no explore-slurm.sh block in docs/scheduling.md"
    return m.group(1)


def normalized(text: str, *dirs: str) -> str:
    for d in dirs:
        text = text.replace(d, "DIR")
    return re.sub(r"DIR/shard-\d+", "DIR", text)


def test_the_slurm_job_array_script_gives_the_report_of_one_local_run(cluster, tmp_path):
    options = ["--strategy", "seeded", "--runs", "40", "--", TARGET, "late"]
    local = subprocess.run([EXPLORE, "--out", str(tmp_path / "local")] + options, capture_output=True, text=True,
                           timeout=300)
    assert local.returncode == 1, local.stdout + local.stderr

    script = tmp_path / "explore-slurm.sh"
    script.write_text(script_from_doc())
    out = str(tmp_path / "slurm")
    env = dict(cluster.env, KB_EXPLORE=EXPLORE)
    submitted = subprocess.run(["sh", str(script), "4", out] + options, capture_output=True, text=True, env=env,
                               cwd=str(tmp_path), timeout=60)
    assert submitted.returncode == 0, submitted.stdout + submitted.stderr + cluster.logs()
    array, merge = submitted.stdout.split()

    def merged() -> bool:
        return cluster.job(merge).get("JobState") in ("COMPLETED", "FAILED", "CANCELLED", "TIMEOUT", "NODE_FAIL")

    cluster.wait_for(merged, "merge job done", seconds=300)
    job = cluster.job(merge)
    with open(os.path.join(out, "merge.log")) as f:
        report = f.read()
    assert job["ExitCode"] == "1:0", (job, report)
    assert normalized(report, out + "/merged", out) == normalized(local.stdout, str(tmp_path / "local")), report
    for k in range(1, 5):
        assert os.path.exists(os.path.join(out, f"shard-{k}", "result.json")), k
    with open(os.path.join(out, "merged", "shrunk.schedule")) as a, open(tmp_path / "local" / "shrunk.schedule") as b:
        assert a.read() == b.read()
