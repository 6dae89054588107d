"""Invented words for the corpus: teaching MiniGPT-grammar to carry unknown words through unchanged.

Users write about their own world: names, places, animals and things the closed lexicon lacks. The
tokenizer turns such words into placeholders (``tplab.model.placeholders``), and the model learns to
copy placeholders from sentences where some content words were swapped, on both sides of the pair,
for words it cannot have seen:

- ``swap_content_words`` replaces randomly chosen nouns (singular and plural forms together), names,
  plain adjectives and regular verbs (base, -s form and past together) with invented words that
  keep what the grammar needs: a vowel-initial word stays vowel-initial (a/an), a plural stays a
  regular plural (the farmers *were*), a singular noun never looks plural, a verb's -s form is what
  ``<+s>`` writes. Names may end in "s" (carlos, thomas) and still take a singular verb. Some words
  are swapped for *other lexicon words* instead ("drink tea" → "drink bike"), so the model copies
  what it reads rather than what the context makes likely.
- ``adjunct`` is a prepositional phrase (``near the harbour``, ``with anna``, sometimes with an
  invented preposition) appended to both sides, so extra material of shapes the templates do not
  produce is copied too.

Irregular verbs, function words, comparatives and the words an error class changes are never
swapped (a regular verb only where its corrected form can be written from the input), so the
correction of a swapped pair is still exactly the template's correction. Standard library only.
"""

from __future__ import annotations

import random
from dataclasses import dataclass

from tplab.model.lexicon import (ADJECTIVES, COMPARATIVE, LONG_ADJECTIVES, NAMES, NO_AN, NOUNS, PREPOSITIONS,
                                 REGULAR, all_verbs, article, join, lexicon, participle, past, third_sg)
from tplab.model.placeholders import plural_stem, pluralize, starts_with_vowel

# nouns inside the templates' literal phrases ("to the park", "every morning"), singular → plural
# (None for nouns used only uncountably here); every form must already be a lexicon word
PHRASE_NOUNS: dict[str, str | None] = {
    "park": "parks", "store": "stores", "beach": "beaches", "library": "libraries", "station": "stations",
    "city": "cities", "zoo": "zoos", "party": "parties", "house": "houses", "movie": "movies", "sea": "seas",
    "bus": "buses", "train": "trains", "shower": "showers", "newspaper": "newspapers", "mistake": "mistakes",
    "plan": "plans", "glass": "glasses", "window": "windows", "leg": "legs", "name": "names",
    "answer": "answers", "sofa": "sofas", "garden": "gardens", "game": "games", "race": "races",
    "prize": "prizes", "match": "matches", "joke": "jokes", "lie": "lies", "way": "ways",
    "marathon": "marathons", "piano": "pianos", "guitar": "guitars", "museum": "museums",
    "kitchen": "kitchens", "room": "rooms", "door": "doors", "shop": "shops", "account": "accounts",
    "test": "tests", "trip": "trips", "lesson": "lessons", "speech": "speeches", "present": "presents",
    "truck": "trucks", "singer": "singers", "river": "rivers", "job": "jobs", "grandmother": "grandmothers",
    "brother": "brothers", "sister": "sisters", "neighbour": "neighbours", "boy": "boys", "girl": "girls",
    "mother": "mothers", "father": "fathers", "doctor": "doctors", "friend": "friends", "cousin": "cousins",
    "uncle": "uncles", "teacher": "teachers", "kid": "kids", "parent": "parents", "player": "players",
    "nurse": "nurses", "astronaut": "astronauts", "morning": "mornings", "night": "nights", "week": "weeks",
    "year": "years", "day": "days", "summer": "summers", "monday": "mondays", "sunday": "sundays",
    "weekend": "weekends", "dinner": "dinners", "lunch": "lunches", "breakfast": "breakfasts",
    "coffee": None, "tea": None, "milk": None, "water": None, "juice": None, "rice": None, "soup": None,
    "pasta": None, "music": None, "football": None, "chess": None, "tennis": None, "history": None,
    "math": None, "english": None, "yoga": None, "homework": None, "money": None, "food": None,
    "rain": None, "tv": None,
}
CITIES = ["paris", "london"]
STATE_ADJECTIVES = ["hungry", "angry", "busy", "sick", "ready", "sad", "tired"]
ADJUNCT_DETS = ["the", "the", "the", "my", "his", "her", "our", "their", "this", "a"]


@dataclass(frozen=True)
class Swappable:
    """A content word that may be swapped, with the forms that are swapped along with it."""

    role: str  # "noun" | "name" | "adjective" | "verb" (a regular verb)
    singular: str  # the noun's singular, the verb's base form
    plural: str | None = None  # the noun's plural or the verb's -s form (None when unused)
    past: str | None = None  # a regular verb's past tense (= its participle)

    def forms(self) -> list[str]:
        return [f for f in (self.singular, self.plural, self.past) if f]


def _verb_forms() -> set[str]:
    return {f(v) for v in all_verbs() for f in (lambda v: v, third_sg, past, participle)}


def _swappables() -> dict[str, Swappable]:
    """Every swappable form → its entry. Nouns that are also verb forms (``watch``), a/an exceptions
    and comparatives are left out; of the verbs only the regular ones, whose forms follow rules."""
    banned = _verb_forms() | NO_AN | set(COMPARATIVE) | set(LONG_ADJECTIVES)
    entries: list[Swappable] = []
    for sg, (pl, _) in NOUNS.items():
        if " " not in sg and sg != pl:
            entries.append(Swappable("noun", sg, pl))
    entries += [Swappable("noun", sg, pl) for sg, pl in PHRASE_NOUNS.items()]
    entries += [Swappable("name", n) for n in NAMES + CITIES]
    entries += [Swappable("adjective", a) for a in ADJECTIVES + STATE_ADJECTIVES]
    table: dict[str, Swappable] = {}
    for e in entries:
        if any(f in banned or f in table for f in e.forms()):
            continue
        table.update((f, e) for f in e.forms())
    for v in REGULAR:
        e = Swappable("verb", v, third_sg(v), past(v))
        if pluralize(v) == e.plural and not any(f in table for f in e.forms()):
            table.update((f, e) for f in e.forms())
    return table


_LEXICON = set(lexicon())
SWAPPABLE: dict[str, Swappable] = _swappables()
SWAPPABLE_NOUNS: list[Swappable] = sorted({e for e in SWAPPABLE.values() if e.role == "noun" and e.plural},
                                          key=lambda e: e.singular)
_KNOWN_POOLS: dict[tuple[str, bool], list[Swappable]] = {}
for _e in sorted(set(SWAPPABLE.values()), key=lambda e: e.singular):
    _KNOWN_POOLS.setdefault((_e.role, starts_with_vowel(_e.singular)), []).append(_e)


# ---- invented words ------------------------------------------------------------------------------

_ONSETS = ["b", "c", "d", "f", "g", "h", "j", "k", "l", "m", "n", "p", "r", "s", "t", "v", "w", "z",
           "br", "bl", "cr", "cl", "dr", "fl", "fr", "gr", "pl", "pr", "sk", "sl", "st", "tr", "sh", "ch", "th"]
_NUCLEI = ["a", "e", "i", "o", "u", "a", "e", "i", "o", "ai", "ea", "oo", "ou", "ie"]
_MIDDLE = ["", "", "", "n", "r", "l", "m", "s", "t", "k", "nd", "rt", "st", "ng"]
_ENDS = {
    "noun": ["", "", "n", "r", "l", "m", "t", "k", "nd", "rt", "ng", "ck", "x", "ch", "sh", "y", "e", "ss", "et", "on"],
    "name": ["a", "o", "e", "i", "n", "r", "l", "ia", "ne", "ra", "el", "an", "os", "as", "es", "us", "is"],
    "adjective": ["ful", "ous", "ish", "y", "al", "ic", "ent", "id", "less", "ive"],
    "verb": ["", "n", "r", "l", "m", "t", "k", "nd", "rt", "ng", "ck", "sh", "ch", "p", "b", "e", "ize"],
    "preposition": ["", "n", "r", "t", "nd", "st", "ng"],
}


def invent_word(rng: random.Random, role: str, vowel: bool, avoid: set[str]) -> str:
    """A pronounceable word of ``role`` that is in none of ``avoid`` (the vocabulary, the words
    already used); vowel-initial iff ``vowel``. A noun never looks like a plural; a name may."""
    while True:
        parts = [] if vowel else [rng.choice(_ONSETS)]
        for i in range(rng.choice([1, 2, 2, 2, 3])):
            if i:
                parts.append(rng.choice(_ONSETS))
            parts.append(rng.choice(_NUCLEI))
            if i < 2:
                parts.append(rng.choice(_MIDDLE))
        word = "".join(parts) + rng.choice(_ENDS[role])
        if not 3 <= len(word) <= 11 or starts_with_vowel(word) != vowel or word in avoid:
            continue
        if role != "name" and (plural_stem(word) is not None or plural_stem(pluralize(word)) != word):
            continue  # must not look plural, and its plural must read back as it (not "taxis", "movies")
        if role == "verb" and third_sg(word) != pluralize(word):
            continue  # the -s form must be what <+s> writes
        if pluralize(word) in avoid:
            continue
        return word


def _verb_swap_is_safe(entry: Swappable, bad: list[str], good: list[str]) -> bool:
    """A verb may be swapped when every form of it the correction shows can be written from the
    input: copied, or base ↔ -s form (``<+s>`` on or off). A fixed past (``didn't visited`` →
    ``visit``) would need a word the input does not have."""
    in_bad = set(bad) & set(entry.forms())
    for form in set(good) & set(entry.forms()):
        derivable = {entry.singular: entry.plural, entry.plural: entry.singular}.get(form)
        if form not in in_bad and derivable not in in_bad:
            return False
    return True


def _known_replacement(rng: random.Random, entry: Swappable, present: set[str]) -> Swappable | None:
    """Another lexicon word for ``entry`` (same role, same a/an, a plural when one is needed) that
    the pair does not already have, or None."""
    pool = [e for e in _KNOWN_POOLS.get((entry.role, starts_with_vowel(entry.singular)), [])
            if e != entry and not set(e.forms()) & present
            and (entry.plural is None or e.plural in _LEXICON)]
    return rng.choice(pool) if pool else None


def swap_content_words(rng: random.Random, bad: str, good: str, avoid: set[str],
                       known_rate: float = 0.35) -> tuple[str, str]:
    """Swap 1..all of the pair's swappable words, consistently on both sides: for an invented word,
    or (``known_rate`` of the nouns, names and adjectives) for another lexicon word, so that the
    model copies what it reads rather than what the context makes likely."""
    words_bad, words_good = bad.split(), good.split()
    keys: list[Swappable] = []
    for w in words_bad + words_good:
        entry = SWAPPABLE.get(w)
        if entry is None or entry in keys:
            continue
        if entry.role != "verb" or _verb_swap_is_safe(entry, words_bad, words_good):
            keys.append(entry)
    if not keys:
        return bad, good
    r = rng.random()
    n = len(keys) if r < 0.15 else min(len(keys), 1 if r < 0.55 else 2 if r < 0.85 else 3)
    mapping: dict[str, str] = {}
    used = set(avoid)
    present = set(words_bad) | set(words_good)
    for entry in rng.sample(keys, n):
        other = _known_replacement(rng, entry, present) if entry.role != "verb" and rng.random() < known_rate else None
        if other is not None:
            new_sg, new_pl = other.singular, other.plural
            present.update(other.forms())
        else:
            new_sg = invent_word(rng, entry.role, starts_with_vowel(entry.singular), used)
            new_pl = pluralize(new_sg)
            used.update((new_sg, new_pl))
        new_pl = new_pl or new_sg  # only a plural entry's form is used below
        mapping[entry.singular] = new_sg
        if entry.plural:
            mapping[entry.plural] = new_pl
        if entry.past:
            mapping[entry.past] = past(new_sg)
    return (" ".join(mapping.get(w, w) for w in words_bad), " ".join(mapping.get(w, w) for w in words_good))


def adjunct(rng: random.Random, avoid: set[str], invented_preposition: bool = True) -> str:
    """A phrase to add to both sides: ``near the harbour``, ``with anna``, ``for two kids``, ``and
    the dog``; its nouns and names are invented half of the time, its preposition sometimes (unless
    ``invented_preposition`` is False: after an object whose noun the correction changes, "six
    brelk jurjit the phones" would leave which word is the noun ambiguous)."""
    r = rng.random()
    if r < 0.15:
        prep = "and"
    elif r < 0.28 and invented_preposition:
        prep = invent_word(rng, "preposition", False, avoid)
    else:
        prep = rng.choice(PREPOSITIONS)
    r = rng.random()
    if r < 0.3:
        vowel = rng.random() < 0.3
        name = invent_word(rng, "name", vowel, avoid) if rng.random() < 0.6 else rng.choice(NAMES + CITIES)
        return join(prep, name)
    if rng.random() < 0.5:
        noun = invent_word(rng, "noun", rng.random() < 0.3, avoid)
        plural: str | None = pluralize(noun)
    else:
        entry = rng.choice(SWAPPABLE_NOUNS)
        noun = entry.singular
        plural = entry.plural if entry.plural in _LEXICON else None
        if plural is None:
            r = 1.0  # a singular noun phrase: "near the park"
    if r < 0.45:
        return join(prep, rng.choice(["two", "three", "some", "many", "the", "my", "our"]),
                    plural or noun)  # a noun without a plural set r = 1.0 above
    adj = rng.choice(ADJECTIVES) if rng.random() < 0.2 else ""
    det = rng.choice(ADJUNCT_DETS)
    head = join(adj, noun)
    return join(prep, article(head) if det == "a" else det, head)
