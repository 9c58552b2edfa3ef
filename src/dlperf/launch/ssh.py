"""Multi-node runs over OpenSSH: one node agent per host, a c10d rendezvous at the first host.

Every host gets `ssh -o BatchMode=yes -o ConnectTimeout=N -- HOST COMMAND` as an argument list; COMMAND is
built only from dlperf's own values (python path, run id), each quoted. The spec travels on the agent's
stdin, which then stays open as a lifeline: closing it stops that node's workers. Afterwards each node's
result and rank 0's log come back over ssh, and the node's run folder is removed after its process group
is killed, so nothing is left running on any host.
"""

from __future__ import annotations

import contextlib
import dataclasses
import shlex
import shutil
import subprocess
import tarfile
import threading
import time
from dataclasses import dataclass
from pathlib import Path
from typing import IO

from dlperf.errors import LaunchError
from dlperf.launch.base import Launcher, RunJob
from dlperf.launch.hosts import Host, host_port, hosts_for
from dlperf.launch.local import agent_argv, timed_out
from dlperf.launch.messages import AgentSpec, NodeResult, RunResult, merge_results
from dlperf.launch.options import LaunchOptions
from dlperf.records.paths import RunPaths
from dlperf.records.store import write_chunks_atomic
from dlperf.spec import RunSpec

STOP_GRACE_S = 15.0
POLL_S = 0.1
# Binds port 0 on the host and prints what the kernel picked; importing dlperf proves it is installed there.
FREE_PORT_PROBE = "import dlperf, socket; s = socket.socket(); s.bind(('', 0)); print(s.getsockname()[1])"


def ssh_argv(host: Host, options: LaunchOptions, remote: str) -> list[str]:
    """The ssh argument list: non-interactive, bounded connect time, user options, then the host."""
    args = [
        "ssh",
        "-o", "BatchMode=yes",
        "-o", f"ConnectTimeout={options.connect_timeout}",
        "-o", "ServerAliveInterval=5",
        "-o", "ServerAliveCountMax=3",
        "-o", "LogLevel=ERROR",
    ]  # fmt: skip
    for option in options.ssh_options:
        args += ["-o", option]
    return [*args, "--", host.name, remote]


@dataclass
class Node:
    """One host's part in a run: where its files live there and here, and its ssh process."""

    index: int
    host: Host
    remote_dir: str
    console: Path
    proc: subprocess.Popen | None = None
    stopped: bool = False
    ended_at: float = 0.0

    @property
    def start_prefix(self) -> str:
        quoted = shlex.quote(self.remote_dir)
        return f"mkdir -p {quoted} && echo $$ > {quoted}/pgid && exec "

    def fetch_script(self) -> str:
        """Kill what is left of the node's process group, send back the result and log, remove the folder."""
        quoted = shlex.quote(self.remote_dir)
        return (
            f'test -f {quoted}/pgid && kill -KILL -- -"$(cat {quoted}/pgid)" 2>/dev/null; '
            f"tar -C {quoted} -cf - --ignore-failed-read result.json run.log 2>/dev/null; rm -rf {quoted}"
        )


def _note_ends(nodes: list[Node]) -> None:
    """When each agent that has ended was first seen ended."""
    for node in nodes:
        if node.proc.returncode is not None and not node.ended_at:
            node.ended_at = time.monotonic()


class SshLauncher(Launcher):
    """Starts one agent per host over ssh and merges their results into one."""

    takes_hosts = True
    log_note = " (an ssh run's log comes back when it ends: the windows show then)"

    def hosts(self, spec: RunSpec) -> list[Host]:
        return hosts_for(list(self.options.hosts), spec.nodes, spec.devices_per_node)

    def check(self, spec: RunSpec) -> None:
        self.hosts(spec)

    def _nodes(self, job: RunJob, run_id: str) -> list[Node]:
        paths = job.paths
        return [
            Node(
                index=i,
                host=host,
                remote_dir=f"/tmp/{run_id}-node{i}",
                console=paths.console.with_name(f"{paths.log.stem}.node{i}-{host.address}.console.txt"),
            )
            for i, host in enumerate(self.hosts(job.spec))
        ]

    def node_addrs(self, job: RunJob) -> list[str]:
        return [host.address for host in self.hosts(job.spec)]

    def _with_addrs(self, spec: AgentSpec, job: RunJob) -> AgentSpec:
        """An external command's peers (TF_CONFIG, Paddle's endpoints) are at the hosts' addresses."""
        if spec.command is None:
            return spec
        return dataclasses.replace(spec, command=dataclasses.replace(spec.command, node_addrs=self.node_addrs(job)))

    def _node_spec(self, spec: AgentSpec, node: Node, endpoint: str) -> AgentSpec:
        return dataclasses.replace(spec, log_path=f"{node.remote_dir}/run.log").with_launch(
            rdzv_endpoint=endpoint,
            local_addr=node.host.address,
            is_host=node.index == 0,
            log_dir=f"{node.remote_dir}/elastic",
            collect_env=True,
            node_rank=node.index,
            env={**spec.launch.env, "DLPERF_NODE": node.host.address},
        )

    def _agent_script(self, node: Node) -> str:
        """The agent learns its parent (the ssh session) and its run folder, which it removes if that parent dies
        (this side was killed): nothing is left on the host for a fetch that never comes."""
        agent = agent_argv(self.options.remote_python, "-", f"{node.remote_dir}/result.json")
        orphan_env = f'env DLPERF_PARENT_PID="$PPID" DLPERF_RUN_DIR={shlex.quote(node.remote_dir)} '
        return node.start_prefix + orphan_env + shlex.join(agent)

    def _endpoint(self, port: int | str) -> str:
        return host_port(self.options.master_addr or self.options.hosts[0].address, port)

    def describe(self, job: RunJob) -> list[str]:
        """The commands a run would execute, for --dry-run; the port is probed on the first host at run time."""
        port = self.options.master_port or "<free port on the first host>"
        spec = self._with_addrs(job.agent_spec(self.options), job)
        lines = []
        for node in self._nodes(job, spec.launch.run_id):
            lines.append(f"# node {node.index}: {node.host.name}, spec on stdin:")
            lines.append(self._node_spec(spec, node, self._endpoint(port)).to_json())
            lines.append(shlex.join(ssh_argv(node.host, self.options, self._agent_script(node))))
        return lines

    def run(self, job: RunJob, workdir: Path) -> RunResult:
        """Probe every host, start the agents, wait, stop the rest on the first failure, bring back results."""
        hosts = self.hosts(job.spec)
        probe = self._probe_hosts(hosts)
        if isinstance(probe, RunResult):
            return probe
        spec = self._with_addrs(job.agent_spec(self.options), job)
        nodes = self._nodes(job, spec.launch.run_id)
        endpoint = self._endpoint(self.options.master_port or probe)
        try:
            for node in nodes:
                self._start(node, self._node_spec(spec, node, endpoint))
            finished = self._wait(nodes, time.monotonic() + job.spec.timeout)
        finally:
            for node in nodes:
                self._stop(node)
        results = [self._fetch(node, job.paths) for node in nodes]
        if not finished:
            return timed_out(job.spec.timeout)
        return merge_results(results, [node.ended_at or float("inf") for node in nodes])

    def _probe_hosts(self, hosts: list[Host]) -> int | RunResult:
        """Every host answers over ssh and has dlperf installed; the first one names a free port."""
        if shutil.which("ssh") is None:
            raise LaunchError("the ssh client is not installed here: install OpenSSH (apt-get install openssh-client)")
        probe = shlex.join([self.options.remote_python, "-c", FREE_PORT_PROBE])
        procs = [
            subprocess.Popen(
                ssh_argv(host, self.options, probe),
                stdin=subprocess.DEVNULL,
                stdout=subprocess.PIPE,
                stderr=subprocess.PIPE,
                text=True,
            )
            for host in hosts
        ]
        outputs = []
        for host, proc in zip(hosts, procs):
            try:
                out, err = proc.communicate(timeout=self.options.connect_timeout + 30)
            except subprocess.TimeoutExpired:
                _kill_all(procs)
                return RunResult.failed(f"host {host.name} did not answer over ssh in time", host=host.name)
            if proc.returncode != 0 or not out.strip().isdigit():
                _kill_all(procs)
                return RunResult.failed(probe_error(host, proc.returncode, err), host=host.name)
            outputs.append(out)
        return int(outputs[0])

    def _start(self, node: Node, node_spec: AgentSpec) -> None:
        with open(node.console, "ab") as console:
            node.proc = subprocess.Popen(
                ssh_argv(node.host, self.options, self._agent_script(node)),
                stdin=subprocess.PIPE,
                stdout=console,
                stderr=subprocess.STDOUT,
                start_new_session=True,
            )
        node.proc.stdin.write(node_spec.to_json().encode() + b"\n")
        node.proc.stdin.flush()

    def _wait(self, nodes: list[Node], deadline: float) -> bool:
        """Wait for every agent; after the first failure stop the others. False when the time ran out."""
        while time.monotonic() < deadline:
            running = [n for n in nodes if n.proc.poll() is None]
            _note_ends(nodes)
            if not running:
                return True
            if any(n.proc.returncode not in (None, 0) for n in nodes):
                for node in running:
                    self._close_lifeline(node)
            time.sleep(POLL_S)
        return False

    def _close_lifeline(self, node: Node) -> None:
        node.stopped = True
        with contextlib.suppress(OSError):
            node.proc.stdin.close()

    def _stop(self, node: Node) -> None:
        """Close the lifeline, give the agent time to stop its workers, then end the ssh client."""
        if node.proc is None:
            return
        if node.proc.poll() is None:
            self._close_lifeline(node)
        try:
            node.proc.wait(timeout=STOP_GRACE_S)
        except subprocess.TimeoutExpired:
            node.proc.kill()
            node.proc.wait()
        with contextlib.suppress(OSError):
            node.proc.stdin.close()

    def _fetch(self, node: Node, paths: RunPaths) -> NodeResult:
        """The node's result (its log too when it held rank 0, streamed into the run's log), or a failure naming
        the host."""
        fetch = ssh_argv(node.host, self.options, node.fetch_script())
        proc = subprocess.Popen(fetch, stdin=subprocess.DEVNULL, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL)
        late = threading.Event()
        watchdog = threading.Timer(self.options.connect_timeout + 60, lambda: (late.set(), proc.kill()))
        watchdog.start()
        with proc.stdout:
            result = unpack(proc.stdout, paths.log)
        watchdog.cancel()
        proc.wait()
        if late.is_set():
            return NodeResult.failed(f"{node.host.name} did not answer", host=node.host.address)
        if result is None:
            return NodeResult.failed(
                f"the agent on {node.host.name} ended without a result; see {node.console}", host=node.host.address
            )
        return NodeResult.from_json(result)


def _kill_all(procs: list[subprocess.Popen]) -> None:
    for proc in procs:
        proc.kill()
        proc.wait()


def unpack(stream: IO[bytes], log: Path) -> str | None:
    """A node's tar stream: its `run.log` copied into `log` as it comes (a gigabyte is never held), its
    `result.json` returned; a truncated stream gives what arrived whole (a cut log is not written)."""
    result = None
    with contextlib.suppress(tarfile.TarError), tarfile.open(fileobj=stream, mode="r|") as archive:
        for member in archive:
            content = archive.extractfile(member) if member.isfile() else None
            if content is not None and Path(member.name).name == "run.log":
                write_chunks_atomic(log, iter(lambda: content.read(1 << 20), b""))  # noqa: B023 - used at once
            elif content is not None and Path(member.name).name == "result.json":
                result = content.read().decode("utf-8", "replace")
    return result


def probe_error(host: Host, code: int, stderr: str) -> str:
    """One line naming the host and ssh's own reason (refused, no route, key denied, dlperf missing)."""
    lines = [line.strip() for line in stderr.strip().splitlines() if line.strip()]
    reason = lines[-1] if lines else f"exit code {code}"
    if code == 255:
        return f"cannot reach host {host.name} over ssh: {reason}"
    return f"host {host.name} answered but cannot run dlperf with its python: {reason} (see --remote-python)"
