"""The rule corruptor's ``left_to_model`` group (what the default tier 1 leaves to the model), on real records of the
four training sources, and the slice built from it: each class writes the change its label says, tier 1 alone leaves
most of it wrong, and the held-out test shares no source record with training."""

from __future__ import annotations

import random
from collections import Counter

import pytest
from conftest import ROOT, shared_path

from data_gen import sources
from data_gen.builder import build
from data_gen.config import load_config
from data_gen.corrupt import mutations
from data_gen.corrupt.rules import ERROR_GROUPS, CorruptionError, corrupt, tool_index
from refiner import formats
from refiner.calls import ToolCall, same_calls
from refiner.pipeline import Refiner
from rewards import compute_score

LEFT = ERROR_GROUPS["left_to_model"]
SOURCES = {"toolace": "toolace_real", "xlam": "xlam_real", "nestools": "nestools/test_data.jsonl",
           "glaive": "glaive_demo"}


@pytest.fixture(scope="module")
def samples():
    out = []
    for name, rel in SOURCES.items():
        out += sources.load(name, shared_path(*rel.split("/")), limit=120, progress=False)[:60]
    return out


def _applied(sample, cls, seed):
    try:
        return corrupt(sample.calls, sample.fmt, sample.tools, random.Random(seed), [cls], query=sample.query)
    except CorruptionError:
        return None


def _changed_arg(gold, bad):
    """The one (call index, gold arguments, corrupted arguments) pair that differs."""
    diff = [(i, g.arguments, b.arguments) for i, (g, b) in enumerate(zip(gold, bad)) if g != b]
    assert len(diff) == 1 and len(gold) == len(bad)
    return diff[0]


@pytest.mark.parametrize("cls", LEFT)
def test_each_class_applies_to_real_records_and_says_what_it_did(samples, cls):
    seen = Counter()
    for k, s in enumerate(samples):
        c = _applied(s, cls, k)
        if c is None:
            continue
        seen[s.source] += 1
        f = formats.get(s.fmt)
        assert c.error_classes == (cls,) and c.groups == ("left_to_model",)
        parsed = f.parse_strict(c.text)  # every class here keeps the text well-formed
        assert parsed == c.calls and not same_calls(parsed, s.calls, f)
        i, gold, bad = _changed_arg(s.calls, c.calls)
        spec = tool_index(s.tools).get(s.calls[i].name)
        request = mutations.request_text(s.query)
        if cls == "param_name_case":
            (old,), (new,) = set(gold) - set(bad), set(bad) - set(gold)
            assert "".join(mutations.name_words(old)) == "".join(mutations.name_words(new))  # same letters, same order
            assert len(mutations.name_words(old)) >= 2
            assert bad[new] == gold[old]
        elif cls == "number_as_text":
            (key,) = [k for k in gold if gold[k] != bad[k]]
            assert isinstance(gold[key], (int, float)) and not isinstance(gold[key], bool)
            assert bad[key] == str(gold[key])
        elif cls == "one_item_list":
            (key,) = [k for k in gold if gold[k] != bad[k]]
            assert bad[key] == [gold[key]] and not isinstance(gold[key], (list, dict, bool))
        elif cls == "undeclared_param":
            (key,) = set(bad) - set(gold)
            assert spec is not None and key not in spec.params
        elif cls == "query_value_dropped":
            (key,) = set(gold) - set(bad)
            assert spec is not None and key in spec.required
            assert mutations.stated_in(gold[key], request)
        elif cls == "query_value_altered":
            (key,) = [k for k in gold if gold[k] != bad[k]]
            assert mutations.stated_in(gold[key], request) and bad[key] != gold[key]
            assert type(bad[key]) is type(gold[key])  # a wrong copy, not a type change
    assert sum(seen.values()) >= 20, seen  # applies to a good share of real records...
    assert len(seen) >= 3, seen  # ...of most sources


def test_query_classes_need_the_request(samples):
    s = next(s for s in samples if _applied(s, "query_value_dropped", 0))
    with pytest.raises(CorruptionError):
        corrupt(s.calls, s.fmt, s.tools, random.Random(0), ["query_value_dropped", "query_value_altered"])


def test_stated_in_reads_numbers_as_numbers_and_strings_in_any_case():
    assert mutations.stated_in(25, "a 25 km run")
    assert not mutations.stated_in(25, "a 125 km run") and not mutations.stated_in(25, "version 2.25")
    assert mutations.stated_in(2.5, "add 2.5 cups") and not mutations.stated_in(2.5, "add 12.55 cups")
    assert mutations.stated_in("New York", "flights to new york please")
    assert not mutations.stated_in("NY", "NY") and not mutations.stated_in(True, "true")
    assert not mutations.stated_in(["a"], "a")


def test_other_case_keeps_the_words_and_skips_one_word_names():
    rng = random.Random(0)
    for name in ("sort_by", "sortBy", "SortBy", "sort-by", "max_results_per_page", "userID"):
        for _ in range(10):
            new = mutations.other_case(name, rng)
            assert new != name and "".join(mutations.name_words(new)) == "".join(mutations.name_words(name))
    assert mutations.other_case("query", rng) is None


def test_altered_never_returns_the_value():
    rng = random.Random(1)
    request = "Book a table for 4 people at Luigi's in San Francisco on 2024-05-03"
    for value in (4, 4.0, "San Francisco", "2024-05-03", "Luigi's", "x"):
        for _ in range(20):
            assert mutations.altered(value, request, rng) != value


def test_undeclared_needs_a_spec():
    with pytest.raises(CorruptionError):
        corrupt([ToolCall("f", {"a": 1})], "hermes", None, 0, ["undeclared_param"])


def test_default_mixes_do_not_ask_for_the_group():
    """The paper and local mixes name groups; ``left_to_model`` is in none of them, so their rows are unchanged."""
    for path in ("configs/data/paper.yaml", "configs/data/local.yaml"):
        cfg = load_config(ROOT / path)
        assert "left_to_model" not in cfg["types"]["erroneous"]["error_types"]
    assert not set(LEFT) & {c for g, cs in ERROR_GROUPS.items() if g != "left_to_model" for c in cs}


@pytest.fixture(scope="module")
def slice_dir(tmp_path_factory):
    out = tmp_path_factory.mktemp("left-to-model")
    cfg = load_config(ROOT / "configs" / "data" / "left-to-model.yaml")
    cfg["types"]["erroneous"]["per_source"] = 12
    cfg["types"]["correct"]["per_source"] = 3
    paths = {name: str(shared_path(*rel.split("/"))) for name, rel in SOURCES.items()}
    build(cfg, out, source_paths=paths, progress=False)
    return out


def test_slice_splits_by_source_record(slice_dir):
    import pyarrow.parquet as pq

    parts = {n: pq.read_table(slice_dir / f"{n}.parquet").to_pylist() for n in ("train", "validation", "test")}
    records = {n: {(r["extra_info"]["source"], r["extra_info"]["record_id"]) for r in rows}
               for n, rows in parts.items()}
    assert not records["test"] & records["train"] and not records["test"] & records["validation"]
    assert not records["train"] & records["validation"]
    total = sum(map(len, parts.values()))
    assert abs(len(parts["test"]) - 0.3 * total) <= 12  # dealt by whole records
    classes = Counter(r["extra_info"]["error_classes"][0] for r in parts["test"] if len(r["extra_info"]["error_classes"]))
    assert set(classes) == set(LEFT)
    for rows in parts.values():
        for r in rows:
            assert r["extra_info"]["error_group"] in ("left_to_model", "")
            gt = r["reward_model"]["ground_truth"]
            up = compute_score(r["data_source"], r["extra_info"]["upstream"], gt, variant="strict")
            assert (up["acc"] == 1) == (r["extra_info"]["label"] == "correct")


def test_tier1_alone_leaves_most_of_the_slice(slice_dir):
    """What the slice is for: tier 1 (default policy) fixes none of the semantic classes and few of the soft ones;
    parameter names in another case convention are the exception (tier 1 renames most of them; the docs say so)."""
    import pyarrow.parquet as pq

    rows = pq.read_table(slice_dir / "train.parquet").to_pylist()
    src = {}
    for name, rel in SOURCES.items():
        for s in sources.load(name, shared_path(*rel.split("/")), progress=False):
            src[(name, str(s.record_id))] = s
    reqs = []
    for r in rows:
        s = src[(r["extra_info"]["source"], str(r["extra_info"]["record_id"]))]
        reqs.append({"tools": s.tools, "system": s.system, "query": s.query, "upstream": r["extra_info"]["upstream"],
                     "format": r["extra_info"]["format"]})
    fixed, n = Counter(), Counter()
    for r, res in zip(rows, Refiner().refine_batch(reqs)):
        cls = r["extra_info"]["error_classes"][0] if len(r["extra_info"]["error_classes"]) else "clean"
        n[cls] += 1
        gt = r["reward_model"]["ground_truth"]
        fixed[cls] += compute_score(r["data_source"], res["refined"], gt, variant="strict")["acc"]
    assert fixed["query_value_dropped"] == 0 and fixed["query_value_altered"] == 0
    for cls in ("number_as_text", "one_item_list", "undeclared_param"):
        assert fixed[cls] <= 0.25 * n[cls], (cls, fixed[cls], n[cls])
    assert fixed["clean"] == n["clean"]
