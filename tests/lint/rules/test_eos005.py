"""EOS005: librdkafka socket.timeout.ms not below transaction.timeout.ms."""


def test_socket_timeout_far_above_is_a_startup_error(lint):
    producer = {"transaction.timeout.ms": "30000", "socket.timeout.ms": "60000"}
    [finding] = lint("EOS005", producer=producer)
    assert finding.severity == "error"
    assert "refuses to create the producer" in finding.message
    assert "at most 29900" in finding.fix


def test_socket_timeout_inside_the_margin_fires_without_startup_error(lint):
    producer = {"transaction.timeout.ms": "30000", "socket.timeout.ms": "29950"}
    [finding] = lint("EOS005", producer=producer)
    assert "outlive the transaction" in finding.message


def test_socket_timeout_100ms_below_passes(lint):
    producer = {"transaction.timeout.ms": "30000", "socket.timeout.ms": "29900"}
    assert lint("EOS005", producer=producer) == []


def test_unset_socket_timeout_is_adjusted_by_librdkafka(lint):
    assert lint("EOS005", producer={"transaction.timeout.ms": "30000"}) == []


def test_java_client_has_no_socket_timeout(lint):
    producer = {"transaction.timeout.ms": "30000", "socket.timeout.ms": "60000"}
    assert lint("EOS005", client="java", producer=producer) == []
