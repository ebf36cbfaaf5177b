"""The Avro suite's section: each codec's records/s and its ratio to Confluent's serdes."""

from kafka_eos.bench.avro import render

RESULT = {
    "records": 200_000,
    "fields": 20,
    "bytes_per_record": 135,
    "encode_raw_per_s": 40_000,
    "decode_raw_per_s": 50_000,
    "encode_framed_per_s": 44_000,
    "decode_framed_per_s": 60_000,
    "confluent_encode_per_s": 20_000,
    "confluent_decode_per_s": 24_000,
}


def test_the_section_quotes_each_codec_against_confluents() -> None:
    section = render(RESULT, "kafka-eos bench --suite avro --records 200000")
    assert section.startswith("## Avro: encode and decode\n")
    assert (
        "`kafka-eos bench --suite avro --records 200000`: 200,000 records of 20 fields" in section
    )
    assert "| ours, raw Avro | 40,000 | 2.00x | 50,000 | 2.08x |" in section
    assert "| ours, Confluent wire format | 44,000 | 2.20x | 60,000 | 2.50x |" in section
    assert (
        "| Confluent's AvroSerializer / AvroDeserializer | 20,000 | 1.00x | 24,000 | 1.00x |"
        in (section)
    )
