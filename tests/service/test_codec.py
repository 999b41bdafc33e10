import msgpack
import numpy as np
import pytest

from service import codec


def test_nested_state_round_trips_exactly():
    state = {
        "format": "grove.bandit-forest",
        "version": 1,
        "counts": np.arange(12, dtype=np.int64).reshape(3, 4),
        "trees": [{"mask": np.array([True, False]), "p": np.float64(0.25)}, None],
        "names": np.array(["a", "bc"]),
        7: "int keys stay ints",
    }
    back = codec.decode(codec.encode(state))
    assert back["counts"].dtype == np.int64 and back["counts"].shape == (3, 4)
    np.testing.assert_array_equal(back["counts"], state["counts"])
    np.testing.assert_array_equal(back["trees"][0]["mask"], [True, False])
    assert back["trees"][0]["p"] == 0.25 and type(back["trees"][0]["p"]) is float
    np.testing.assert_array_equal(back["names"], ["a", "bc"])
    assert back[7] == "int keys stay ints"
    back["counts"][0, 0] = 99  # decoded arrays are writable copies
    assert state["counts"][0, 0] == 0


def test_non_contiguous_and_big_endian_arrays():
    a = np.arange(20, dtype=">f4").reshape(4, 5)[:, ::2]
    back = codec.decode(codec.encode({"a": a}))["a"]
    np.testing.assert_array_equal(back, a)


def test_object_arrays_are_refused_both_ways():
    with pytest.raises(codec.CodecError):
        codec.encode({"a": np.array([object()], dtype=object)})
    hostile = msgpack.packb(
        {
            "codec": codec.CODEC,
            "version": 1,
            "data": msgpack.ExtType(1, msgpack.packb(["|O", [1], b"\0" * 8])),
        },
        use_bin_type=True,
    )
    with pytest.raises(codec.CodecError, match="refusing dtype"):
        codec.decode(hostile)


def test_unknown_payloads_are_refused():
    with pytest.raises(codec.CodecError):
        codec.decode(b"\x80\x04not msgpack at all")  # e.g. a pickle
    with pytest.raises(codec.CodecError, match="version"):
        codec.decode(msgpack.packb({"codec": codec.CODEC, "version": 99, "data": 1}))
    with pytest.raises(codec.CodecError, match="not a"):
        codec.decode(msgpack.packb({"something": "else"}))
    with pytest.raises(TypeError):
        codec.encode({"a": {1, 2}})
