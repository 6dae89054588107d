"""A deterministic synthetic grammar-correction corpus: ``bad → good`` sentence pairs.

Why synthetic: the lab needs a model that does something checkable (exact-match corrections) and
trains on a laptop CPU in minutes. Sentences come from templates over a closed lexicon (subjects,
verbs with all their forms, noun phrases, adjectives, time expressions); each example is a correct
sentence plus one error class injected into it:

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

from tplab.model.tokenizer import Tokenizer, split_words

HELD_OUT_BUCKETS = 10  # one bucket in ten is held out
HELD_OUT_SEED = 20_251_130


@dataclass(frozen=True)
class Example:
    bad: str
    good: str
    kind: str


# ---- lexicon ---------------------------------------------------------------------------------

PRONOUNS = {"i": "me", "you": "you", "he": "him", "she": "her", "we": "us", "they": "them"}
PERSON = {"i": "1s", "you": "2", "he": "3s", "she": "3s", "we": "1p", "they": "3p"}
NAMES = ["tom", "anna", "maria", "john", "sara", "peter", "lucy", "david", "emma", "ben", "paul"]
SG_NPS = ["my brother", "my sister", "the teacher", "our neighbour", "the boy", "the girl",
          "my mother", "my father", "the doctor", "his friend", "her cousin", "the old man",
          "my uncle", "the baby", "the cat", "the dog"]
PL_NPS = ["my parents", "the kids", "the students", "our friends", "my cousins", "the boys",
          "the girls", "the teachers", "her parents", "the players"]

# base, third person singular, past, past participle, regularised (wrong) past
IRREGULAR: dict[str, tuple[str, str, str, str]] = {
    "go": ("goes", "went", "gone", "goed"), "come": ("comes", "came", "come", "comed"),
    "eat": ("eats", "ate", "eaten", "eated"), "drink": ("drinks", "drank", "drunk", "drinked"),
    "see": ("sees", "saw", "seen", "seed"), "buy": ("buys", "bought", "bought", "buyed"),
    "take": ("takes", "took", "taken", "taked"), "write": ("writes", "wrote", "written", "writed"),
    "read": ("reads", "read", "read", "readed"), "make": ("makes", "made", "made", "maked"),
    "find": ("finds", "found", "found", "finded"), "bring": ("brings", "brought", "brought", "bringed"),
    "teach": ("teaches", "taught", "taught", "teached"), "catch": ("catches", "caught", "caught", "catched"),
    "drive": ("drives", "drove", "driven", "drived"), "give": ("gives", "gave", "given", "gived"), "break": ("breaks", "broke", "broken", "breaked"),
    "forget": ("forgets", "forgot", "forgotten", "forgetted"), "sleep": ("sleeps", "slept", "slept", "sleeped"),
    "leave": ("leaves", "left", "left", "leaved"), "meet": ("meets", "met", "met", "meeted"),
    "win": ("wins", "won", "won", "winned"), "lose": ("loses", "lost", "lost", "losed"),
    "sell": ("sells", "sold", "sold", "selled"), "tell": ("tells", "told", "told", "telled"),
    "wear": ("wears", "wore", "worn", "weared"), "know": ("knows", "knew", "known", "knowed"), "do": ("does", "did", "done", "doed"),
    "have": ("has", "had", "had", "haved"), "run": ("runs", "ran", "run", "runned"),
}
REGULAR = ["like", "love", "want", "play", "watch", "visit", "cook", "clean", "open", "need", "help",
           "walk", "call", "study", "enjoy", "finish", "start", "hate"]

PLACES = ["to school", "to work", "to the park", "to the store", "home", "to the beach",
          "to the library", "to the station", "to the city", "to bed", "to the zoo", "to the party"]
# complements per verb: literal phrases, or a noun category in capitals (see NOUNS)
COMPLEMENTS: dict[str, list[str]] = {
    "go": PLACES, "come": ["home", "to school", "to the party", "to my house", "to work", "late"],
    "eat": ["FOOD", "FOOD", "", "lunch", "breakfast", "dinner", "rice", "soup"],
    "drink": ["water", "milk", "coffee", "tea", "juice", "the milk", "a glass of water"],
    "see": ["ANIMAL", "THING", "the movie", "the sea", "PERSON"],
    "buy": ["FOOD", "THING", "THING"], "take": ["THING", "the bus", "the train", "a shower"],
    "write": ["WRITING", "WRITING"], "read": ["WRITING", "the news", "the newspaper"],
    "make": ["dinner", "breakfast", "a cake", "a mistake", "a sandwich", "a plan", "coffee"],
    "find": ["THING", "ANIMAL"], "bring": ["THING", "FOOD"],
    "teach": ["math", "english", "history", "music", "the kids", "the students"],
    "catch": ["the ball", "the bus", "the train", "a fish", "a cold", "ANIMAL"],
    "drive": ["to work", "the car", "home", "a truck", "to the city"],
    "give": ["a present", "a speech", "a lesson", "the answer", "some money"],
    "break": ["the window", "a glass", "his leg", "THING"],
    "forget": ["the keys", "his name", "the answer", "THING"],
    "sleep": ["", "well", "on the sofa", "at home"], "leave": ["home", "the house", "early", "the keys", "work"],
    "meet": ["PERSON", "my friends", "the teacher", "a famous singer"],
    "win": ["the game", "the race", "a prize", "the match"], "lose": ["the game", "the match", "THING"],
    "sell": ["THING", "the house", "the car"], "tell": ["a story", "the truth", "a joke", "a lie"],
    "wear": ["CLOTHES", "CLOTHES", "glasses"], "know": ["the answer", "his name", "the way", "PERSON"],
    "do": ["the homework", "my homework", "the dishes", "the shopping", "yoga"],
    "have": ["ANIMAL", "THING", "breakfast", "lunch", "a shower"],
    "run": ["to school", "in the park", "fast", "home", "a marathon"],
    "like": ["FOODS", "music", "football", "chess", "coffee", "tea", "ANIMALS", "school", "the movie"],
    "hate": ["FOODS", "homework", "the rain", "ANIMALS", "mondays", "coffee"],
    "love": ["FOODS", "music", "PERSON", "ANIMALS", "the beach", "summer"],
    "want": ["THING", "a dog", "some water", "to go home", "to play football", "FOOD"],
    "play": ["football", "tennis", "chess", "the piano", "the guitar", "video games", "with the dog"],
    "watch": ["tv", "the news", "a movie", "the game", "the birds"],
    "visit": ["my grandmother", "the museum", "paris", "london", "the zoo", "his uncle"],
    "cook": ["dinner", "pasta", "rice", "lunch", "eggs", "the soup"],
    "clean": ["the kitchen", "the house", "my room", "the car", "the windows"],
    "open": ["the door", "the window", "THING", "a shop", "an account"],
    "need": ["help", "THING", "more time", "some money", "a doctor"],
    "help": ["my mother", "the teacher", "the kids", "him", "her", "PERSON"],
    "walk": ["to school", "home", "the dog", "in the park", "to work"],
    "call": ["my father", "the doctor", "the police", "her sister", "PERSON"],
    "study": ["english", "math", "history", "for the test", "at the library"],
    "enjoy": ["the party", "the movie", "the trip", "the music", "the food"],
    "finish": ["the work", "the book", "the homework", "the race", "dinner"],
    "start": ["a new job", "the car", "the lesson", "school"],
}

# noun: plural, category. Vowel-initial nouns and adjectives take "an" (except the listed ones).
NOUNS: dict[str, tuple[str, str]] = {
    "apple": ("apples", "FOOD"), "orange": ("oranges", "FOOD"), "egg": ("eggs", "FOOD"),
    "banana": ("bananas", "FOOD"), "sandwich": ("sandwiches", "FOOD"), "cake": ("cakes", "FOOD"),
    "pizza": ("pizzas", "FOOD"), "cookie": ("cookies", "FOOD"), "onion": ("onions", "FOOD"),
    "pear": ("pears", "FOOD"), "carrot": ("carrots", "FOOD"), "tomato": ("tomatoes", "FOOD"),
    "potato": ("potatoes", "FOOD"), "ice cream": ("ice creams", "FOOD"),
    "book": ("books", "THING"), "car": ("cars", "THING"), "bike": ("bikes", "THING"),
    "phone": ("phones", "THING"), "ball": ("balls", "THING"), "umbrella": ("umbrellas", "THING"),
    "key": ("keys", "THING"), "bag": ("bags", "THING"), "box": ("boxes", "THING"),
    "watch": ("watches", "THING"), "picture": ("pictures", "THING"), 
    "ticket": ("tickets", "THING"), "toy": ("toys", "THING"),
    "knife": ("knives", "THING"), "envelope": ("envelopes", "THING"), "computer": ("computers", "THING"),
    "chair": ("chairs", "THING"), "uniform": ("uniforms", "CLOTHES"),
    "hat": ("hats", "CLOTHES"), "shirt": ("shirts", "CLOTHES"), "coat": ("coats", "CLOTHES"),
    "dress": ("dresses", "CLOTHES"), 
    "dog": ("dogs", "ANIMAL"), "cat": ("cats", "ANIMAL"), "horse": ("horses", "ANIMAL"),
    "bird": ("birds", "ANIMAL"), "elephant": ("elephants", "ANIMAL"), "owl": ("owls", "ANIMAL"),
    "fox": ("foxes", "ANIMAL"), "mouse": ("mice", "ANIMAL"), "rabbit": ("rabbits", "ANIMAL"),
    "sheep": ("sheep", "ANIMAL"),
    "child": ("children", "PERSON"), "man": ("men", "PERSON"), "woman": ("women", "PERSON"),
    "person": ("people", "PERSON"), "baby": ("babies", "PERSON"), "actor": ("actors", "PERSON"),
    "artist": ("artists", "PERSON"), "engineer": ("engineers", "PERSON"), "student": ("students", "PERSON"),
    "letter": ("letters", "WRITING"), "email": ("emails", "WRITING"), "story": ("stories", "WRITING"),
    "song": ("songs", "WRITING"), "poem": ("poems", "WRITING"), "report": ("reports", "WRITING"),
    
}
NO_AN = {"uniform", "useful"}
ADJECTIVES = ["big", "small", "new", "old", "red", "blue", "green", "nice", "cheap", "expensive",
              "interesting", "ugly", "empty", "heavy", "little", "strange", "useful", "young",
              "amazing", "awful", "easy", "important", "huge", "funny"]
NUMBERS = ["two", "three", "four", "five", "six", "ten", "many", "several", "some"]
DETS = ["the", "my", "his", "her", "our", "their", "your", "this", "that"]
JOBS = ["doctor", "teacher", "engineer", "artist", "actor", "nurse", "student", "astronaut"]

# comparatives: adjective -> comparative; the long ones use "more"
COMPARATIVE = {"fast": "faster", "big": "bigger", "small": "smaller", "tall": "taller", "old": "older",
               "young": "younger", "cheap": "cheaper", "strong": "stronger", "happy": "happier",
               "easy": "easier", "heavy": "heavier", "long": "longer", "short": "shorter",
               "hot": "hotter", "cold": "colder", "good": "better", "bad": "worse"}
WRONG_COMPARATIVE = {"good": ["gooder", "more good", "more better"], "bad": ["badder", "more bad", "more worse"]}
LONG_ADJECTIVES = ["beautiful", "expensive", "interesting", "difficult", "dangerous", "important",
                   "comfortable", "popular", "careful", "famous"]
THINGS_COMPARED = ["my car", "his car", "this house", "that house", "tom", "anna", "my brother",
                   "her sister", "the new phone", "the old phone", "this city", "london", "paris",
                   "the river", "my bag", "this book", "that book", "the first test", "my dog", "your dog"]
STATES = ["happy", "tired", "hungry", "late", "angry", "busy", "sick", "ready", "at home",
          "at school", "in the garden", "sad", "early", "here"]

PRESENT_TIMES = ["every day", "every morning", "on sundays", "at night", "every week", "on weekends",
                 "in the morning", "after school", "often", "sometimes"]
PAST_TIMES = ["yesterday", "last night", "last week", "last year", "this morning", "two days ago",
              "on monday", "last summer"]
PERFECT_TIMES = ["before", "twice", "many times", "this week", "today", "already"]
NEGATIVE_WORDS = {"no": "any", "nothing": "anything", "nobody": "anybody", "nowhere": "anywhere"}


# ---- building correct sentences ------------------------------------------------------------------

def join(*parts: str) -> str:
    return " ".join(p for p in parts if p)


def article(word: str) -> str:
    return "an" if word[0] in "aeiou" and word not in NO_AN else "a"


def third_sg(verb: str) -> str:
    if verb in IRREGULAR:
        return IRREGULAR[verb][0]
    if verb.endswith(("s", "sh", "ch", "x", "o")):
        return verb + "es"
    if verb.endswith("y") and verb[-2] not in "aeiou":
        return verb[:-1] + "ies"
    return verb + "s"


def past(verb: str) -> str:
    if verb in IRREGULAR:
        return IRREGULAR[verb][1]
    if verb.endswith("e"):
        return verb + "d"
    if verb.endswith("y") and verb[-2] not in "aeiou":
        return verb[:-1] + "ied"
    return verb + "ed"


def participle(verb: str) -> str:
    return IRREGULAR[verb][2] if verb in IRREGULAR else past(verb)


def nouns_in(category: str) -> list[str]:
    return [n for n, (_, cat) in NOUNS.items() if cat == category]


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
    """(subject text, person): a pronoun, a name or a noun phrase."""
    r = rng.random()
    if r < 0.5:
        s = rng.choice(list(PRONOUNS))
        return s, PERSON[s]
    if r < 0.7:
        return rng.choice(NAMES), "3s"
    if r < 0.87:
        return rng.choice(SG_NPS), "3s"
    return rng.choice(PL_NPS), "3p"


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


def all_verbs() -> list[str]:
    return sorted(IRREGULAR) + REGULAR


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


def sample(rng: random.Random) -> Example:
    kind, gen = rng.choices(GENERATORS, weights=_WEIGHTS)[0]
    bad, good = gen(rng)
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


#: words that appear only inside the generators' code
_TEMPLATE_WORDS = ["a", "an", "is", "are", "am", "was", "were", "has", "have", "than", "more",
                   "don't", "doesn't", "didn't", "dont", "doesnt", "didnt", "tell", "."]


def _strings(value: object) -> Iterator[str]:
    if isinstance(value, str):
        yield value
    elif isinstance(value, dict):
        for k, v in value.items():
            yield from _strings(k)
            yield from _strings(v)
    elif isinstance(value, (list, tuple, set)):
        for v in value:
            yield from _strings(v)


def lexicon() -> list[str]:
    """Every word the corpus can produce: the lexicon tables, every verb/noun/adjective form and the
    templates' own words (a test checks that sampled sentences contain no other word)."""
    tables = [PRONOUNS, NAMES, SG_NPS, PL_NPS, IRREGULAR, REGULAR, PLACES, COMPLEMENTS, NOUNS, NO_AN,
              ADJECTIVES, NUMBERS, DETS, JOBS, COMPARATIVE, WRONG_COMPARATIVE, LONG_ADJECTIVES,
              THINGS_COMPARED, STATES, PRESENT_TIMES, PAST_TIMES, PERFECT_TIMES, NEGATIVE_WORDS,
              _TEMPLATE_WORDS]
    words = {w for table in tables for text in _strings(table) for w in split_words(text)
             if not text.isupper() and w.islower() or w in ("'", ".")}
    words.update(f(v) for v in all_verbs() for f in (third_sg, past, participle))
    words.update(a + "er" for a in LONG_ADJECTIVES)
    return sorted(words)


def build_tokenizer() -> Tokenizer:
    return Tokenizer.build(lexicon())
