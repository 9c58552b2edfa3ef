"""Host lists, launch options and the ssh command line: checked before anything reaches ssh."""

from __future__ import annotations

import pytest
from conftest import TINY, run_cli

from dlperf.errors import ConfigError
from dlperf.launch import launcher_for
from dlperf.launch.hosts import Host, host_port, hosts_for, parse_hosts, read_hostfile
from dlperf.launch.messages import Failure, NodeResult, merge_results
from dlperf.launch.options import LaunchOptions
from dlperf.launch.sbatch import SbatchLauncher, spec_flags
from dlperf.launch.ssh import ssh_argv
from dlperf.orchestration.run import plan_jobs
from dlperf.workloads import check_spec, spec_from_mapping


def test_host_list_keeps_order_and_users():
    assert parse_hosts("node1, alice@node2,10.0.0.3") == [Host("node1"), Host("alice@node2"), Host("10.0.0.3")]
    assert parse_hosts("alice@node2")[0].address == "node2"


def test_ipv6_hosts_lose_their_brackets_and_endpoints_gain_them():
    hosts = parse_hosts("[fd00::1],alice@[fd00::2],fd00::3")
    assert hosts == [Host("fd00::1"), Host("alice@fd00::2"), Host("fd00::3")]
    assert hosts[1].address == "fd00::2"
    assert host_port("fd00::1", 29500) == "[fd00::1]:29500" == host_port("[fd00::1]", 29500)
    assert host_port("10.0.0.1", 29500) == "10.0.0.1:29500" and host_port("node1", 1) == "node1:1"
    with pytest.raises(ConfigError, match="appears twice"):
        parse_hosts("fd00::1,[fd00::1]")


@pytest.mark.parametrize(
    ("bad", "message"),
    [("fd00::zz", "not a valid IPv6"), ("fe80::1%eth0", "zone"), ("[fd00::1;id]", "not a valid IPv6"),
     ("a b@node1", "user")],
)  # fmt: skip
def test_bad_ipv6_hosts_and_users_are_refused(bad, message):
    with pytest.raises(ConfigError, match=message):
        parse_hosts(bad)


@pytest.mark.parametrize(
    "bad", ["node1;reboot", "$(id)", "`id`", "a b", "-oProxyCommand=x", "node|x", "n'1", "node&", "a,,b", ""]
)
def test_shell_metacharacters_and_options_are_refused(bad):
    with pytest.raises(ConfigError):
        parse_hosts(bad)


def test_duplicate_hosts_are_refused():
    with pytest.raises(ConfigError, match="appears twice"):
        parse_hosts("node1,root@node1")


def test_hostfile_slots_comments_and_errors(tmp_path):
    path = tmp_path / "hosts"
    path.write_text("# cluster\nnode1 slots=8\n\nnode2   # spare\n")
    assert read_hostfile(path) == [Host("node1", 8), Host("node2")]
    path.write_text("node1 slots=x\n")
    with pytest.raises(ConfigError, match="line 1"):
        read_hostfile(path)
    path.write_text("# nothing\n")
    with pytest.raises(ConfigError, match="no hosts"):
        read_hostfile(path)
    with pytest.raises(ConfigError, match="cannot read hostfile"):
        read_hostfile(tmp_path / "missing")


def test_hosts_for_takes_the_first_nodes_and_checks_slots():
    hosts = [Host("a", 2), Host("b", 2), Host("c")]
    assert hosts_for(hosts, 2, 2) == hosts[:2]
    with pytest.raises(ConfigError, match="needs 4 hosts"):
        hosts_for(hosts, 4, 1)
    with pytest.raises(ConfigError, match="slots=2"):
        hosts_for(hosts, 2, 4)


def test_ssh_gets_an_argument_list_with_batch_mode_and_timeout():
    options = LaunchOptions(hosts=(Host("node1"),), ssh_options=("Port=2222",), connect_timeout=7)
    args = ssh_argv(Host("alice@node1"), options, "true")
    assert args[0] == "ssh" and args[-3:] == ["--", "alice@node1", "true"]
    assert "BatchMode=yes" in args and "ConnectTimeout=7" in args and "Port=2222" in args


@pytest.mark.parametrize(
    ("options", "message"),
    [
        (LaunchOptions(ifname="eth0; rm"), "--ifname"),
        (LaunchOptions(hosts=(Host("a"),), ssh_options=("NoValue",)), "--ssh-option"),
        (LaunchOptions(master_addr="x;y"), "--master-addr"),
    ],
)
def test_bad_launch_options(options, message):
    with pytest.raises(ConfigError, match=message):
        options.validate()


@pytest.mark.parametrize(
    ("options", "message"),
    [
        (LaunchOptions(launcher="ssh"), "--launcher ssh needs --hosts"),
        (LaunchOptions(launcher="slurm", hosts=(Host("a"),)), "go with the ssh launcher, not --launcher slurm"),
        (LaunchOptions(launcher="local", hosts=(Host("a"),)), "go with the ssh launcher, not --launcher local"),
        (LaunchOptions(launcher="mpirun"), "unknown launcher 'mpirun': choose one of local, ssh, srun, sbatch, slurm"),
    ],
)
def test_a_launcher_checks_the_hosts_it_is_given(options, message):
    with pytest.raises(ConfigError, match=message):
        launcher_for(options)


def test_ifname_reaches_nccl_and_gloo():
    assert LaunchOptions(ifname="eth0").worker_env() == {"NCCL_SOCKET_IFNAME": "eth0", "GLOO_SOCKET_IFNAME": "eth0"}


def test_merge_prefers_rank0_then_the_killed_worker_over_its_echoes():
    measured = object()
    ok = [NodeResult(host="b", env={"node": "b"}), NodeResult(host="a", measured=measured)]
    assert merge_results(ok, [1.0, 2.0]).measured is measured
    assert merge_results(ok, [1.0, 2.0]).node_envs == [{"node": "b"}]
    echo = NodeResult.failed("peer lost", host="a", exitcode=1)
    killed = NodeResult.failed("killed", host="b", exitcode=-9, signal="SIGKILL")
    stopped = NodeResult.failed("stopped", host="c", stopped=True)
    merged = merge_results([echo, killed, stopped], [1.0, 2.0, 0.5]).failure
    assert merged == Failure("killed", host="b", exitcode=-9, signal="SIGKILL")
    assert merged.facts() == {"host": "b", "exitcode": -9, "signal": "SIGKILL"}
    unmeasured = merge_results([ok[0]], [1.0])  # the record then says no rank reported (or reads an external log)
    assert unmeasured.measured is None and unmeasured.failure is None


def test_batch_script_rebuilds_the_case():
    spec = spec_from_mapping(
        {"model": "resnet50", "nodes": 2, "devices_per_node": 4, "batch_size": 64, "compile": True}
    )
    flags = spec_flags(spec)
    assert flags[:6] == ["--model", "resnet50", "--nodes", "2", "--devices-per-node", "4"]
    assert "--compile" in flags and "--batch-size" in flags and "--lr" not in flags
    job = plan_jobs(spec, check_spec(spec), [1], "out")[0]
    script = SbatchLauncher(LaunchOptions(launcher="slurm", partition="p", ifname="ib0")).batch_script(job, [1, 2])
    assert script.count(" -m dlperf run ") == 2 and "#SBATCH --partition=p" in script and "--ifname ib0" in script


def test_run_dry_run_prints_ssh_commands_without_running(tmp_path, capsys):
    code, out, err = run_cli(
        ["run", *TINY, "--hosts", "node1,node2", "--ifname", "eth0", "--dry-run", "--out", str(tmp_path)], capsys
    )
    assert code == 0, err
    commands = [line for line in out.splitlines() if line.startswith("ssh ")]
    assert len(commands) == 2 and "-- node1 " in commands[0] and "-- node2 " in commands[1]
    assert '"nnodes": 2' in out and '"GLOO_SOCKET_IFNAME": "eth0"' in out
    assert not list(tmp_path.iterdir())
    ipv6 = ["run", *TINY, "--hosts", "[fd00::1],fd00::2", "--dry-run", "--out", str(tmp_path)]
    code, out, err = run_cli(ipv6, capsys)
    assert code == 0, err
    assert '"rdzv_endpoint": "[fd00::1]:<free port on the first host>"' in out and "-- fd00::2 " in out


def test_nodes_beyond_one_need_hosts(tmp_path, capsys):
    code, _, err = run_cli(["run", *TINY, "--nodes", "2", "--out", str(tmp_path)], capsys)
    assert code == 2 and "--hosts" in err
