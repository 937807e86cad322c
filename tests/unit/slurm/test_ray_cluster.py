"""The join watcher's report (``ray_cluster.alive_hosts``): the alive nodes are the last
whole JSON list the watcher wrote; anything else (Ray's own lines, a line half written,
no file yet) is not a node."""

from __future__ import annotations

from pathlib import Path

from hpcenv.slurm import ray_cluster


def test_the_last_whole_list_is_the_alive_nodes(tmp_path: Path) -> None:
    report = tmp_path / "ray-join.log"
    report.write_text('["node1"]\n["node1", "node2.cluster"]\n["node1", "no')
    assert ray_cluster.alive_hosts(report) == ["node1", "node2.cluster"]


def test_before_the_watcher_reached_the_head_no_node_is_alive(tmp_path: Path) -> None:
    assert ray_cluster.alive_hosts(tmp_path / "ray-join.log") == []  # not written yet
    report = tmp_path / "ray-join.log"
    report.write_text("2026-11-27 07:12:07 INFO worker.py -- Connecting to existing cluster\n")
    assert ray_cluster.alive_hosts(report) == []
    report.write_text('{"not": "a list"}\n')
    assert ray_cluster.alive_hosts(report) == []
