from zencli.diffs import first_difference


def test_first_difference_names_the_first_differing_leaf_in_key_order():
    old = {"data": {"seed": 1, "max_seq_len": 128}, "lr": 1e-3}
    new = {"data": {"seed": 2, "max_seq_len": 64}, "lr": 1e-3}
    assert first_difference(old, new) == "data.max_seq_len: 128 there, 64 now"
    assert first_difference(old, old) is None
    assert first_difference({"a": 1}, {"a": 1, "b": [2]}) == "b: None there, [2] now"
