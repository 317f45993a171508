"""The answer rules the harness exports carry (formats.harness_rules): `match` reads articles as the normaliser
does, and the copies are one: `vhmine eval` scores with this module, and the lmms-eval and VLMEvalKit exports
embed its source as it is, beside a normaliser equal to vhmine.rules.modes'."""

import inspect

import pytest

from vhmine.bench import BenchItem, Benchmark
from vhmine.eval.job import match_oeq
from vhmine.export.job import write_benchmark
from vhmine.formats.lmms_eval import _rules_source
from vhmine.rules import harness as harness_rules

ARTICLE_CASES = [  # (answer, references, match?)
    ("Dog", ["a dog"], True),
    ("The dog.", ["a dog"], True),
    ("I see a dog on the sofa", ["the dog"], True),
    ("dog", ["An dog"], True),
    ("A dog", ["dog"], True),
    ("the big dog", ["a big dog"], True),
    ("a cat", ["a dog"], False),
    ("hotdog", ["a dog"], False),
    ("The dogs", ["a dog"], False),
    ("It is A.", ["A"], True),
    ("a", ["A"], True),
    ("It is B", ["A"], False),
    ("", ["a"], False),
    ("the", ["the"], True),
    ("There are four cats.", ["4"], True),
    ("fourteen", ["4"], False),
]


@pytest.mark.parametrize("answer, refs, expected", ARTICLE_CASES)
def test_match_treats_articles_as_the_normaliser_does(answer, refs, expected):
    from vhmine.rules.modes import normalize_answer

    assert match_oeq(answer, refs) is expected
    assert harness_rules.match_oeq(answer, refs) is expected
    if normalize_answer(answer) == normalize_answer(
        refs[0]
    ):  # what the normaliser calls the same answer always matches
        assert expected


def test_one_copy_of_the_rules(tmp_path):
    """vhmine eval's match is harness_rules'; both exports embed that module's source verbatim; its normaliser
    is vhmine.rules.modes' (the same code and tables)."""
    from vhmine.rules import modes as M

    assert match_oeq("The dog.", ["a dog"]) and not match_oeq("hotdog", ["a dog"])
    src = _rules_source()
    assert "def match_oeq(answer, references):" in src
    items = [
        BenchItem("o", "existence", "OEQ", "What is there?", ("a dog",), None, None, None),
        BenchItem("y", "existence", "YNQ", "Is there a dog?", ("Yes",), True, None, None),
    ]
    bench = Benchmark("t", items)
    write_benchmark(bench, tmp_path / "le", "lmms-eval")
    write_benchmark(bench, tmp_path / "vl", "vlmevalkit")
    assert src in (tmp_path / "le" / "utils.py").read_text()
    assert src in (tmp_path / "vl" / "vhmine_vlmevalkit.py").read_text()
    # the normaliser: the same body as vhmine.rules.modes', over the same word and article tables
    mine = (
        inspect.getsource(M.normalize_answer).replace("_ARTICLES", "ARTICLES").replace("_NUMBER_WORDS", "NUMBER_WORDS")
    )
    assert mine.replace("text: str) -> str:", "text):") == inspect.getsource(harness_rules.normalize_answer)
    assert harness_rules.NUMBER_WORDS == M._NUMBER_WORDS and harness_rules.ARTICLES.pattern == M._ARTICLES.pattern
    assert set(harness_rules.ARTICLE_WORDS) == set(M._ARTICLES.pattern.split("(")[1].split(")")[0].split("|"))
