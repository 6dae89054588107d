"""The closed lexicon of MiniGPT-grammar's synthetic corpus, and the inflection rules over it.

Tables (pronouns, names, noun phrases, verbs with all their forms, nouns with their plurals and a
category, adjectives, time expressions) and the word functions the sentence generators in
``tplab.model.corpus`` build on. ``lexicon()`` is every word the templates can produce: the
tokenizer's vocabulary (plus placeholders for the words it does not have).
"""

from __future__ import annotations

from typing import Iterator

from tplab.model.tokenizer import split_words

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
THINGS_COMPARED_PL = ["my dogs", "your cats", "the new cars", "the old bikes", "her books", "our bags",
                      "these phones", "those shirts", "the kids", "my parents", "the students", "his cousins"]
STATES = ["happy", "tired", "hungry", "late", "angry", "busy", "sick", "ready", "at home",
          "at school", "in the garden", "sad", "early", "here"]

PRESENT_TIMES = ["every day", "every morning", "on sundays", "at night", "every week", "on weekends",
                 "in the morning", "after school", "often", "sometimes"]
PAST_TIMES = ["yesterday", "last night", "last week", "last year", "this morning", "two days ago",
              "on monday", "last summer"]
PERFECT_TIMES = ["before", "twice", "many times", "this week", "today", "already"]
NEGATIVE_WORDS = {"no": "any", "nothing": "anything", "nobody": "anybody", "nowhere": "anywhere"}
# prepositions of the adjunct phrases appended to sentences ("near the park", "with anna")
PREPOSITIONS = ["in", "at", "with", "near", "for", "from", "after", "before", "on"]


# ---- word forms ----------------------------------------------------------------------------------


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


def all_verbs() -> list[str]:
    return sorted(IRREGULAR) + REGULAR


#: words that appear only inside the generators' code
_TEMPLATE_WORDS = ["a", "an", "is", "are", "am", "was", "were", "has", "have", "than", "more",
                   "don't", "doesn't", "didn't", "dont", "doesnt", "didnt", "tell", "and", "."]


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
              THINGS_COMPARED, THINGS_COMPARED_PL, STATES, PRESENT_TIMES, PAST_TIMES, PERFECT_TIMES,
              NEGATIVE_WORDS, PREPOSITIONS, _TEMPLATE_WORDS]
    words = {w for table in tables for text in _strings(table) for w in split_words(text)
             if not text.isupper() and w.islower() or w in ("'", ".")}
    words.update(f(v) for v in all_verbs() for f in (third_sg, past, participle))
    words.update(a + "er" for a in LONG_ADJECTIVES)
    return sorted(words)
