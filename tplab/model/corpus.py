"""A deterministic synthetic grammar-correction corpus: ``bad → good`` sentence pairs.

Why synthetic: the lab needs a model that does something checkable (exact-match corrections) and
trains on a laptop CPU in minutes. Sentences come from templates over a closed lexicon
(``tplab.model.lexicon``: subjects, verbs with all their forms, noun phrases, adjectives, time
expressions); each example is a correct sentence plus one error class injected into it:

    irregular_past   he goed to school             → he went to school
    agreement        she like apples / they is late → she likes apples / they are late
    perfect          i has eat                     → i have eaten
    negation         she dont like apples          → she doesn't like apples
    article          he bought a apple             → he bought an apple
    plural           i saw three child             → i saw three children
    pronoun_case     me went to the park           → i went to the park
    comparative      my car is more faster than…   → my car is faster than…
    double_negation  i don't have no money         → i don't have any money
    correct          (a correct sentence)          → (the same sentence, copied unchanged)

Subjects are singular and plural (pronouns, names, noun phrases, "tom and anna") in every error
class, and an agreement error is always fixed on the verb, never on the subject. Half of the
examples have content words swapped for invented or other lexicon words on both sides
(``tplab.model.invent``), and some get a phrase added ("… near the park"), so the model learns to
carry words it does not know, and material the templates do not produce, through unchanged.

The held-out split is disjoint by construction: a *correct* sentence belongs to the held-out split
iff a stable hash (crc32) of it falls in one bucket out of ``HELD_OUT_BUCKETS``; training examples
are drawn with those sentences rejected, so no held-out target (and hence no held-out pair) is ever
trained on. Everything is seeded and uses no ``hash()``, so the corpus is the same on every machine.
"""

from __future__ import annotations

import random
import zlib
from dataclasses import dataclass
from typing import Callable, Iterator

from tplab.model.lexicon import (ADJECTIVES, COMPARATIVE, COMPLEMENTS, DETS, IRREGULAR, JOBS, LONG_ADJECTIVES,
                                 NAMES, NEGATIVE_WORDS, NOUNS, NUMBERS, PAST_TIMES, PERFECT_TIMES, PERSON, PL_NPS,
                                 PRESENT_TIMES, PRONOUNS, SG_NPS, STATES, THINGS_COMPARED, THINGS_COMPARED_PL,
                                 WRONG_COMPARATIVE,
                                 all_verbs, article, join, lexicon, nouns_in, participle, past, third_sg)
from tplab.model.invent import adjunct, swap_content_words
from tplab.model.tokenizer import Tokenizer

HELD_OUT_BUCKETS = 10  # one bucket in ten is held out
HELD_OUT_SEED = 20_251_130
N_SLOTS = 8  # distinct unknown words one sentence can carry through (placeholders <w1> … <w8>)
SWAP_RATE = 0.5  # share of examples with content words swapped for invented ones
ADJUNCT_RATE = 0.3  # share of examples with a prepositional phrase appended
_AVOID = set(lexicon())  # invented words must not be corpus words


@dataclass(frozen=True)
class Example:
    bad: str
    good: str
    kind: str


def noun_phrase(rng: random.Random, category: str, det: str | None = None) -> str:
    """A singular noun phrase: determiner, maybe an adjective, a noun of ``category``."""
    noun = rng.choice(nouns_in(category))
    adj = rng.choice(ADJECTIVES) if rng.random() < 0.3 else ""
    head = join(adj, noun)
    if det is None:
        det = rng.choice(DETS + ["a"] * 4)
    if det in ("a", "an"):
        det = article(head)
    return join(det, head)


def complement(rng: random.Random, verb: str) -> str:
    slot = rng.choice(COMPLEMENTS[verb])
    if slot.endswith("S") and slot[:-1] in {"FOOD", "ANIMAL"}:  # bare plural: "apples"
        return NOUNS[rng.choice(nouns_in(slot[:-1]))][0]
    if slot.isupper():
        return noun_phrase(rng, slot)
    return slot


def subject(rng: random.Random) -> tuple[str, str]:
    """(subject text, person): a pronoun, a name, a singular or a plural noun phrase, or two names.

    Plural subjects come with every error class, so the model learns to fix the verb to agree with
    whatever the subject is (never the subject to agree with the verb)."""
    r = rng.random()
    if r < 0.45:
        s = rng.choice(list(PRONOUNS))
        return s, PERSON[s]
    if r < 0.63:
        return rng.choice(NAMES), "3s"
    if r < 0.79:
        return rng.choice(SG_NPS), "3s"
    if r < 0.89:
        return rng.choice(PL_NPS), "3p"
    if r < 0.96:
        noun = rng.choice(nouns_in(rng.choice(["PERSON", "ANIMAL"])))
        return join(rng.choice(["the", "the", "my", "our", "her", "his", "their"]), NOUNS[noun][0]), "3p"
    return join(rng.choice(NAMES + SG_NPS), "and", rng.choice([n for n in NAMES] + ["i"])), "3p"


def present(verb: str, person: str) -> str:
    return third_sg(verb) if person == "3s" else verb


def be(person: str, tense: str) -> str:
    if tense == "past":
        return "was" if person in ("1s", "3s") else "were"
    return {"1s": "am", "3s": "is"}.get(person, "are")


def with_time(rng: random.Random, clause: str, times: list[str], p: float = 0.5) -> str:
    if rng.random() >= p:
        return clause
    t = rng.choice(times)
    return join(t, clause) if t in PAST_TIMES and rng.random() < 0.3 else join(clause, t)


# ---- one generator per class: returns (bad, good) ------------------------------------------------

def gen_irregular_past(rng: random.Random) -> tuple[str, str]:
    verb = rng.choice(sorted(IRREGULAR))
    s, _ = subject(rng)
    comp = complement(rng, verb)
    time = rng.choice(PAST_TIMES + [""] * 4)
    front = time and rng.random() < 0.3
    def sentence(v: str) -> str:
        return join(time, s, v, comp) if front else join(s, v, comp, time)
    return sentence(IRREGULAR[verb][3]), sentence(IRREGULAR[verb][1])


def gen_agreement(rng: random.Random) -> tuple[str, str]:
    s, person = subject(rng)
    if rng.random() < 0.3:  # be + state
        tense = rng.choice(["present", "present", "past"])
        right = be(person, tense)
        wrong = rng.choice([b for b in (["was", "were"] if tense == "past" else ["am", "is", "are"]) if b != right])
        state = rng.choice(STATES)
        tail = rng.choice(PAST_TIMES) if tense == "past" and rng.random() < 0.4 else ""
        return join(s, wrong, state, tail), join(s, right, state, tail)
    verb = rng.choice([v for v in all_verbs() if v not in ("read",)])
    comp = complement(rng, verb)
    right = present(verb, person)
    wrong = verb if person == "3s" else third_sg(verb)
    time = rng.choice(PRESENT_TIMES + [""] * 3)
    return join(s, wrong, comp, time), join(s, right, comp, time)


def gen_perfect(rng: random.Random) -> tuple[str, str]:
    verb = rng.choice(sorted(IRREGULAR))
    s, person = subject(rng)
    comp = complement(rng, verb) if rng.random() < 0.6 else ""
    if verb in ("give", "tell", "teach") and not comp:
        comp = rng.choice(COMPLEMENTS[verb])
    time = rng.choice(PERFECT_TIMES + [""] * 3)
    aux = "has" if person == "3s" else "have"
    base, _, past_, pp, _ = (verb, *IRREGULAR[verb])
    while True:
        bad_aux = ("have" if aux == "has" else "has") if rng.random() < 0.6 else aux
        bad_verb = rng.choice([f for f in (base, past_) if f != pp] or [pp]) if rng.random() < 0.75 else pp
        if (bad_aux, bad_verb) != (aux, pp):
            break
    return join(s, bad_aux, bad_verb, comp, time), join(s, aux, pp, comp, time)


def gen_negation(rng: random.Random) -> tuple[str, str]:
    verb = rng.choice(all_verbs())
    s, person = subject(rng)
    comp = complement(rng, verb)
    if rng.random() < 0.3:  # past: didn't
        time = rng.choice(PAST_TIMES + [""] * 2)
        if rng.random() < 0.5 and past(verb) != verb:
            return join(s, "didn't", past(verb), comp, time), join(s, "didn't", verb, comp, time)
        return join(s, "didnt", verb, comp, time), join(s, "didn't", verb, comp, time)
    time = rng.choice(PRESENT_TIMES[:8] + [""] * 3)
    aux = "doesn't" if person == "3s" else "don't"
    if rng.random() < 0.2 and person == "3s":  # doesn't likes
        return join(s, aux, third_sg(verb), comp, time), join(s, aux, verb, comp, time)
    wrong = rng.choice([a for a in ("don't", "doesn't", "dont", "doesnt") if a != aux])
    return join(s, wrong, verb, comp, time), join(s, aux, verb, comp, time)


def _clause(rng: random.Random, obj: str, verbs: list[str]) -> str:
    """A correct clause (random tense) whose object is ``obj``."""
    s, person = subject(rng)
    verb = rng.choice(verbs)
    tense = rng.choice(["present", "past", "past", "perfect"])
    if tense == "present":
        return join(s, present(verb, person), obj, rng.choice(PRESENT_TIMES + [""] * 4))
    if tense == "past":
        return join(s, past(verb), obj, rng.choice(PAST_TIMES + [""] * 4))
    return join(s, "has" if person == "3s" else "have", participle(verb), obj)


_OBJECT_VERBS = {"FOOD": ["eat", "buy", "want", "bring", "find"], "THING": ["buy", "find", "want", "need", "sell", "bring"],
                 "ANIMAL": ["see", "find", "have", "want"], "CLOTHES": ["wear", "buy", "want", "need"],
                 "PERSON": ["see", "meet", "help", "call"], "WRITING": ["write", "read", "find"]}


def gen_article(rng: random.Random) -> tuple[str, str]:
    if rng.random() < 0.25:  # "she is an engineer"
        s = rng.choice(["he", "she", "my brother", "my sister", "tom", "anna", "her cousin", "my father"])
        job = rng.choice(JOBS)
        verb = rng.choice(["is", "was"])
        good_art = article(job)
        return join(s, verb, "an" if good_art == "a" else "a", job), join(s, verb, good_art, job)
    category = rng.choice(sorted(_OBJECT_VERBS))
    np = noun_phrase(rng, category, det="a")
    art, rest = np.split(" ", 1)
    bad_np = join("an" if art == "a" else "a", rest)
    good = _clause(rng, np, _OBJECT_VERBS[category])
    # the object phrase occurs once in the clause: swap its article
    return good.replace(" " + np, " " + bad_np, 1), good


def gen_plural(rng: random.Random) -> tuple[str, str]:
    category = rng.choice(sorted(_OBJECT_VERBS))
    noun = rng.choice([n for n in nouns_in(category) if NOUNS[n][0] != n])
    adj = rng.choice(ADJECTIVES) if rng.random() < 0.25 else ""
    num = rng.choice(NUMBERS)
    good_np, bad_np = join(num, adj, NOUNS[noun][0]), join(num, adj, noun)
    good = _clause(rng, good_np, _OBJECT_VERBS[category])
    return good.replace(" " + good_np, " " + bad_np, 1), good


def gen_pronoun_case(rng: random.Random) -> tuple[str, str]:
    s = rng.choice([p for p in PRONOUNS if p != "you"])
    person = PERSON[s]
    verb = rng.choice(all_verbs())
    comp = complement(rng, verb)
    tense = rng.choice(["present", "past", "past"])
    if tense == "present":
        rest = join(present(verb, person), comp, rng.choice(PRESENT_TIMES + [""] * 3))
    else:
        rest = join(past(verb), comp, rng.choice(PAST_TIMES + [""] * 3))
    return join(PRONOUNS[s], rest), join(s, rest)


def gen_comparative(rng: random.Random) -> tuple[str, str]:
    if rng.random() < 0.25:  # plural things: "my dogs are bigger than your cats"
        a, b = rng.sample(THINGS_COMPARED_PL, 2)
        verb = rng.choice(["are", "were"])
    else:
        a, b = rng.sample(THINGS_COMPARED, 2)
        verb = rng.choice(["is", "was"])
    if rng.random() < 0.3:
        adj = rng.choice(LONG_ADJECTIVES)
        good = "more " + adj
        bad = rng.choice([adj + "er", "more " + adj + "er"])
    else:
        adj = rng.choice(sorted(COMPARATIVE))
        good = COMPARATIVE[adj]
        bad = rng.choice(WRONG_COMPARATIVE.get(adj, ["more " + good, "more " + adj]))
    return join(a, verb, bad, "than", b), join(a, verb, good, "than", b)


def gen_double_negation(rng: random.Random) -> tuple[str, str]:
    s, person = subject(rng)
    neg = rng.choice(list(NEGATIVE_WORDS))
    if neg == "no":
        verb = rng.choice(["have", "need", "want", "buy", "see", "find", "eat"])
        obj = rng.choice(["money", "time", "friends", "food", "milk", "water", "homework", "help", "NOUNS"])
        if obj == "NOUNS":
            cat = {"eat": "FOOD", "see": "ANIMAL", "find": "THING"}.get(verb, "THING")
            obj = NOUNS[rng.choice(nouns_in(cat))][0]
    elif neg == "nowhere":
        verb, obj = rng.choice(["go", "drive", "walk", "run"]), ""
    else:
        verb = rng.choice(["see", "know", "tell", "find", "want", "eat"] if neg == "nothing"
                          else ["see", "know", "meet", "call", "help", "tell"])
        obj = ""
    aux = rng.choice(["didn't", "doesn't" if person == "3s" else "don't"])
    tail = rng.choice(PAST_TIMES if aux == "didn't" else PRESENT_TIMES[:8]) if rng.random() < 0.3 else ""
    return join(s, aux, verb, neg, obj, tail), join(s, aux, verb, NEGATIVE_WORDS[neg], obj, tail)


def gen_correct(rng: random.Random) -> tuple[str, str]:
    """A correct sentence of any template, to be copied unchanged."""
    _, good = rng.choice(_ERROR_GENERATORS)[1](rng)
    return good, good


_ERROR_GENERATORS: list[tuple[str, Callable[[random.Random], tuple[str, str]]]] = [
    ("irregular_past", gen_irregular_past), ("agreement", gen_agreement), ("perfect", gen_perfect),
    ("negation", gen_negation), ("article", gen_article), ("plural", gen_plural),
    ("pronoun_case", gen_pronoun_case), ("comparative", gen_comparative),
    ("double_negation", gen_double_negation),
]
GENERATORS = _ERROR_GENERATORS + [("correct", gen_correct)]
KINDS = [k for k, _ in GENERATORS]
_WEIGHTS = [1.0] * len(_ERROR_GENERATORS) + [1.3]


# ---- splits ------------------------------------------------------------------------------------

def is_held_out(good: str) -> bool:
    """Whether the correct sentence ``good`` belongs to the held-out split (stable across machines)."""
    return zlib.crc32(good.encode()) % HELD_OUT_BUCKETS == 0


_TIMES = sorted(set(PRESENT_TIMES + PAST_TIMES + PERFECT_TIMES), key=len, reverse=True)


def add_adjunct(rng: random.Random, bad: str, good: str, extra: str) -> tuple[str, str]:
    """``extra`` at the end of both sides, or (half the time) before a time expression both end
    with: "he went home with anna yesterday"."""
    for t in _TIMES:
        if bad.endswith(" " + t) and good.endswith(" " + t) and rng.random() < 0.5:
            return join(bad[: -len(t) - 1], extra, t), join(good[: -len(t) - 1], extra, t)
        if bad.endswith(" " + t) and good.endswith(" " + t):
            break
    return join(bad, extra), join(good, extra)


def sample(rng: random.Random) -> Example:
    kind, gen = rng.choices(GENERATORS, weights=_WEIGHTS)[0]
    bad, good = gen(rng)
    if rng.random() < ADJUNCT_RATE:  # extra material to copy: "… near the park", "… with carlos"
        bad, good = add_adjunct(rng, bad, good, adjunct(rng, _AVOID, kind not in ("plural", "article")))
    if rng.random() < SWAP_RATE:  # content words the model cannot know, carried through as placeholders
        bad, good = swap_content_words(rng, bad, good, _AVOID)
    if rng.random() < 0.2:  # some sentences end with a full stop, on both sides
        bad, good = bad + " .", good + " ."
    return Example(bad=bad, good=good, kind=kind)


def train_stream(seed: int = 0) -> Iterator[Example]:
    """An endless, seeded stream of training examples; held-out sentences never appear."""
    rng = random.Random(seed)
    while True:
        ex = sample(rng)
        if not is_held_out(ex.good):
            yield ex


def held_out(n: int = 600, seed: int = HELD_OUT_SEED) -> list[Example]:
    """The held-out evaluation split: ``n`` distinct examples whose targets are never trained on."""
    rng = random.Random(seed)
    seen: set[tuple[str, str]] = set()
    out: list[Example] = []
    while len(out) < n:
        ex = sample(rng)
        if is_held_out(ex.good) and (ex.bad, ex.good) not in seen:
            seen.add((ex.bad, ex.good))
            out.append(ex)
    return out


def build_tokenizer() -> Tokenizer:
    """The corpus's words plus ``N_SLOTS`` placeholder slots for words outside them."""
    return Tokenizer.build(lexicon(), n_slots=N_SLOTS)

