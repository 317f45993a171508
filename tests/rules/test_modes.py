"""vhmine.rules.modes: the eight modes, their templates (exact snapshot), slot filling and YNQ drafting."""

import pytest

from vhmine.errors import FormError, InputError
from vhmine.rules import modes as M

TEMPLATES = [
    ("existence.what_is", "OEQ", "What is {where}?"),
    ("existence.is_there_at", "YNQ", "Is there a {object} {where}?"),
    ("existence.is_there", "YNQ", "Is there a {object} in the picture?"),
    ("shape.what_shape", "OEQ", "What is the shape of the {object}?"),
    ("shape.is_shape", "YNQ", "Is the {object} {shape}?"),
    ("color.what_color", "OEQ", "What color is the {object}?"),
    ("color.is_color", "YNQ", "Is the {object} {color}?"),
    ("orientation.facing", "OEQ", "From the camera's point of view, which way is the {object} facing?"),
    ("orientation.is_facing", "YNQ", "From the camera's point of view, is the {object} facing {direction}?"),
    ("ocr.what_text", "OEQ", "What does the text on the {object} say?"),
    ("ocr.does_say", "YNQ", 'Does the text on the {object} say "{text}"?'),
    ("size.which_larger", "OEQ", "Which is larger in the picture, the {a} or the {b}?"),
    ("size.is_larger", "YNQ", "Is the {a} larger than the {b} in the picture?"),
    ("size.largest", "OEQ", "Which {object} is the largest?"),
    ("size.is_largest", "YNQ", "Is the {which} the largest {object} in the picture?"),
    ("position.where", "OEQ", "Where is the {a} relative to the {b}?"),
    ("position.is_at", "YNQ", "Is the {a} {relation} the {b}?"),
    ("position.is_left_of", "YNQ", "Is the {a} to the left of the {b}?"),
    ("counting.how_many", "OEQ", "How many {object} are there in the picture?"),
    ("counting.exactly", "YNQ", "Are there exactly {n} {object} in the picture?"),
]


def test_eight_modes_in_vhtest_order():
    assert M.mode_names() == ("existence", "shape", "color", "orientation", "ocr", "size", "position", "counting")
    assert [M.get_mode(m).group for m in M.mode_names()] == ["object"] * 5 + ["relation"] * 3
    assert all(M.get_mode(m).definition and M.get_mode(m).look_for for m in M.mode_names())


def test_template_snapshot():
    got = [(t.id, t.kind, t.text) for m in M.mode_names() for t in M.get_mode(m).templates]
    assert got == TEMPLATES


def test_every_oeq_template_turns_into_a_ynq_it_can_fill():
    for m in M.mode_names():
        mode = M.get_mode(m)
        assert mode.templates_of("OEQ") and mode.templates_of("YNQ")
        for t in mode.templates_of("OEQ"):
            y = mode.template(t.ynq)
            assert y.kind == "YNQ"
            if t.derive == "value":
                assert t.answer_slot in y.slots and t.answer_slot not in t.slots
                assert set(y.slots) - {t.answer_slot} <= set(t.slots)
            else:
                assert t.derive == "pick" and set(t.choices) <= set(t.slots) and set(y.slots) <= set(t.slots)


def test_unknown_names_list_the_valid_ones():
    with pytest.raises(
        InputError,
        match=(
            r"^unknown mode 'colour': choose one of existence, shape, color, orientation, ocr, size, position,"
            r" counting$"
        ),
    ):
        M.get_mode("colour")
    with pytest.raises(
        FormError,
        match=r"^unknown template 'color.hue' for mode color: choose one of color.what_color, color.is_color$",
    ):
        M.get_template("color.hue")
    assert M.get_template("counting.exactly").slots == ("n", "object")


def test_fill_and_check_question():
    t = M.get_template("position.is_left_of")
    assert M.fill(t, {"a": " red  cup", "b": "plate"}) == "Is the red cup to the left of the plate?"
    with pytest.raises(FormError, match=r"^slot \{b\} of template position.is_left_of is empty: fill it in$") as e:
        M.fill(t, {"a": "cup", "b": "  "})
    assert e.value.field == "slot:b"
    with pytest.raises(FormError, match="^the question is empty"):
        M.check_question("   ")
    with pytest.raises(FormError, match=r"^the question still has an unfilled slot \{object\}: fill it in$"):
        M.check_question("How many {object} are there?")


def test_normalize_and_yes_no():
    assert M.normalize_answer("  The Red  Car. ") == "red car"
    assert M.normalize_answer("Three!") == "3"
    assert M.yes_no_of("No, there are two.") is False and M.yes_no_of("yes") is True
    # eval's default rule, VHTest's classify_response: the letters "no" start "Nothing"; "Maybe" is unreadable
    assert M.yes_no_of("Nothing") is False and M.yes_no_of("Maybe") is None and M.yes_no_of("Yes?") is True
    assert M.clean_answers("3\n three \n\nfour") == ["3", "four"]


def test_draft_counting_uses_the_other_images_count_then_n_plus_one():
    mode = M.get_mode("counting")
    t = mode.template("counting.how_many")
    d = M.draft_ynq(mode, t, {"object": "cats"}, ["3"], ["2"])
    assert [(x.question, x.truth) for x in d] == [
        ("Are there exactly 3 cats in the picture?", True),
        ("Are there exactly 2 cats in the picture?", False),
    ]
    d = M.draft_ynq(mode, t, {"object": "cats"}, ["3"], ["three"])
    assert [(x.question, x.truth) for x in d][1] == ("Are there exactly 4 cats in the picture?", False)


def test_draft_pick_swaps_the_objects():
    mode = M.get_mode("size")
    d = M.draft_ynq(mode, mode.template("size.which_larger"), {"a": "cat", "b": "dog"}, ["The dog"])
    assert [(x.question, x.truth) for x in d] == [
        ("Is the dog larger than the cat in the picture?", True),
        ("Is the cat larger than the dog in the picture?", False),
    ]


def test_draft_value_with_alternatives_and_without():
    color = M.get_mode("color")
    d = M.draft_ynq(color, color.template("color.what_color"), {"object": "bus"}, ["red", "dark red"])
    assert [(x.question, x.truth) for x in d] == [("Is the bus red?", True), ("Is the bus blue?", False)]
    ocr = M.get_mode("ocr")
    d = M.draft_ynq(ocr, ocr.template("ocr.what_text"), {"object": "sign"}, ["STOP"])
    assert [(x.question, x.truth) for x in d] == [
        ('Does the text on the sign say "STOP"?', True)
    ]  # no wrong text to guess
    ex = M.get_mode("existence")
    d = M.draft_ynq(ex, ex.template("existence.what_is"), {"where": "on the table"}, ["a dog."], ["A cat"])
    assert [x.question for x in d] == ["Is there a dog on the table?", "Is there a cat on the table?"]


def test_answer_checks():
    mode = M.get_mode("counting")
    t = mode.template("counting.how_many")
    with pytest.raises(
        FormError,
        match=(
            r"^reference answer 'many' for image A \(x\) is not a whole number: counting answers are counts, e\.g\. 3$"
        ),
    ):
        M.check_oeq_answers(mode, t, {"object": "cats"}, ["3", "many"], "image A (x)")
    with pytest.raises(
        FormError, match=r"^no reference answer for image B: write at least one acceptable answer \(one per line\)$"
    ):
        M.check_oeq_answers(mode, t, {"object": "cats"}, [], "image B")
    size = M.get_mode("size")
    with pytest.raises(FormError, match=r"^reference answer 'the bird' for image A must be one of: cat, dog$"):
        M.check_oeq_answers(size, size.template("size.which_larger"), {"a": "cat", "b": "dog"}, ["the bird"], "image A")
    with pytest.raises(FormError, match=r"^the yes/no question for image A has no truth: choose yes or no$"):
        M.check_ynq(None, [], "image A")
    with pytest.raises(
        FormError,
        match=(
            r"^reference answer 'No, it is blue' for image A contradicts the yes/no truth \(yes\): fix the answer or"
            r" the truth$"
        ),
    ):
        M.check_ynq(True, ["Yes", "No, it is blue"], "image A")
    M.check_ynq(False, ["No, it is blue", "blue"], "image A")
    with pytest.raises(
        FormError, match=r"^yes/no truth yes for q1 contradicts the open-ended answer \(3\): '2' is not one of them$"
    ):
        M.check_draft(True, "2", ["3"], "q1")
    M.check_draft(True, "three", ["3"], "q1")


def test_draft_counting_no_question_never_uses_an_accepted_count():
    # "3" and "4" are both accepted: the drafted "no" question must not ask about 4
    mode = M.get_mode("counting")
    d = M.draft_ynq(mode, mode.template("counting.how_many"), {"object": "cats"}, ["3", "4"])
    assert [(x.question, x.truth, x.value) for x in d] == [
        ("Are there exactly 3 cats in the picture?", True, "3"),
        ("Are there exactly 5 cats in the picture?", False, "5"),
    ]
    M.check_draft(d[1].truth, d[1].value, ["3", "4"], "q")  # the default truth of the draft is consistent


def test_pick_answers_must_name_one_of_two_different_objects():
    size = M.get_mode("size")
    t = size.template("size.which_larger")
    with pytest.raises(
        FormError,
        match=r"^the choices of template size.which_larger are the same \(dog, Dog\): name two different objects$",
    ) as e:
        M.check_oeq_answers(size, t, {"a": "dog", "b": "Dog"}, ["dog"], "image A")
    assert e.value.field == "slot:b"
    with pytest.raises(
        FormError, match=r"^reference answers for image A name both cat and dog: keep the one that is right"
    ) as e:
        M.check_oeq_answers(size, t, {"a": "cat", "b": "dog"}, ["dog", "cat"], "image A")
    assert e.value.field == "answers:image A"
    M.check_oeq_answers(size, t, {"a": "cat", "b": "dog"}, ["dog", "the dog"], "image A")  # one object, two spellings


def test_templates_read_as_english_whatever_place_or_object_is_given():
    ex = M.get_mode("existence")
    what = ex.template("existence.what_is")
    assert M.fill(what, {"where": "in the centre of the picture"}) == "What is in the centre of the picture?"
    assert M.fill(what, {"where": "on the table"}) == "What is on the table?"
    d = M.draft_ynq(ex, what, {"where": "on the table"}, ["an apple"], ["Orange"])
    assert [x.question for x in d] == ["Is there an apple on the table?", "Is there an Orange on the table?"]
    there = ex.template("existence.is_there")
    assert M.fill(there, {"object": "umbrella"}) == "Is there an umbrella in the picture?"
    assert M.fill(there, {"object": "cup"}) == "Is there a cup in the picture?"
    # an edited question is still recognised as the template's, with its article
    assert M.slots_of(there, "Is there an owl in the picture?", {"object": "cup"}) == {"object": "owl"}
    assert all(M.slot_hint(s) for m in M.mode_names() for t in M.get_mode(m).templates for s in t.slots)
