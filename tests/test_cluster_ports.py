"""The free ports a local cluster's listeners get: never one port for two listeners."""

from __future__ import annotations

import socket

from kafka_eos.cluster.ports import free_ports


def test_a_clusters_ports_are_distinct_even_when_drawn_by_the_hundred() -> None:
    # Drawn one at a time (bind port 0, close), 500 ports repeated one in 50 runs of 50, and 15,
    # a three-node cluster's, in 11 runs of 2,000 (2026-11-29); a CI run met it.
    ports = free_ports(500)
    assert len(set(ports)) == 500


def test_each_port_can_be_bound_once_drawn() -> None:
    for port in free_ports(15):
        with socket.socket() as listener:
            listener.bind(("127.0.0.1", port))
