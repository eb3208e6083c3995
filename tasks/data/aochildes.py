"""The AO-CHILDES corpus (adult speech to children, ordered by the child's age) and its validation set.

Rebuilt from the childes-db transcript exports staged under ``aochildes/transcripts/`` with the
rules of the AO-CHILDES pipeline (UIUCLearningLanguageLab/AOCHILDES ``aochildes/pipeline.py``,
``params.py``, ``helpers.py``, ``spelling.py``):

- rows dropped: child age missing or over 6 years (2,190 days), ``num_tokens`` < 1, speaker role
  ``Target_Child`` or ``Child``, collection other than ``Eng-NA``, a gloss containing ``xxx``,
  ``yyy``, ``www`` or U+FFFD (untranscribed speech: the whole utterance goes);
- order: child age, then transcript, then utterance order;
- per utterance: multi-word merges, an end mark (from the question-like openings below, else from
  the utterance ``type``), lower case, the spelling map, ``+``/``_`` split into words, speaker
  codes ``chi``/``mot``/``fat`` spelled out. Each gloss takes the end mark of its own row's
  ``type`` (the pipeline zips glosses with the types of the whole age group, a bug not reproduced).

BabyBERTa then keeps sentences of at least 3 whitespace tokens (the end mark included).

The validation sentences are the held-out CSV (``aochildes/heldout_validation_random.csv``, already
processed the same way) minus every row whose ``transcript_id`` occurs in the training transcripts.
"""
from __future__ import annotations

import re
from dataclasses import dataclass
from functools import lru_cache

import pandas as pd

from .files import data_path, manifest

TRANSCRIPT_PREFIX = "aochildes/transcripts/"
VALIDATION_FILE = "aochildes/heldout_validation_random.csv"

MAX_DAYS = 365 * 6
MIN_NUM_TOKENS = 1
BAD_SPEAKER_ROLES = ("Target_Child", "Child")
COLLECTIONS = ("Eng-NA",)
UNTRANSCRIBED = re.compile("\ufffd|www|xxx|yyy")
MIN_SENTENCE_TOKENS = 3  # BabyBERTa's configs.Data.min_sentence_length

COLUMNS = ("gloss", "type", "speaker_role", "speaker_code", "target_child_age", "transcript_id",
           "utterance_order", "num_tokens", "collection_name")

QUESTION_TYPES = ("question", "self interruption question", "interruption question",
                  "trail off question")
EXCLAMATION_TYPES = ("imperative", "imperative_emphatic", "question exclamation")
QUESTION_OPENINGS = ("where", "how", "who", "when", "you wanna", "do you", "can you")
SPEAKER_CODES = {"chi": "child", "mot": "mother", "fat": "father"}

# AO-CHILDES spelling.py, ``string2w``: substrings of the raw gloss merged into one word.
MERGES = {
    "coca cola": "cocacola",
    "don't cha": "don't you",
    "g_i joe": "gijoe",
}

# AO-CHILDES spelling.py, ``w2string``: one lower-cased word -> its normalized spelling.
SPELLING = {
    # probe words
    "c_d": "cd", "d_v_d": "dvd", "p+j": "pj", "p_j": "pj", "t+shirt": "shirt", "t_shirt": "shirt",
    "dump+truck": "dumptruck", "dump+trucks": "dumptrucks", "head+phones": "headphones",
    "coca_cola": "cocacola", "coca+cola": "cocacola", "g_i_joe": "gijoe", "m_and_m": "m&m",
    # split into pieces
    "everytime": "every time", "lets": "let us", "djou": "do you", "dyou": "do you",
    "didjou": "did you", "wouldjou": "would you", "wouldja": "would you", "whadyou": "what do you",
    "whaddya": "what do you", "whadda": "what do", "whaddaya": "what do you",
    "whatcha": "what are you", "whadya": "what do you", "whada": "what do", "didja": "did you",
    "gimme": "give me", "lemme": "let me", "comere": "come here", "cmere": "come here",
    "camere": "come here", "comon": "come on", "cmon": "come on", "oughta": "ought to",
    "dontcha": "do not you", "getcha": "get you", "howbout": "how about", "havta": "have to",
    "hafta": "have to", "byebye": "bye bye", "nono": "no no", "dunno": "do not know",
    "hahaha": "ha ha ha", "hehehe": "he he he", "waimit": "wait a minute", "betcha": "bet you",
    "willn't": "will not", "wherz": "where is", "meetcha": "meet you", "outa": "out of",
    "knockknock": "knock knock", "whadoes": "what does",
    "whatchamacallit": "what should we call it",
    # spelling
    "lookee": "look", "looka": "look", "lookit": "look", "look_it": "look", "mkay": "okay",
    "mmkay": "okay", "mm+kay": "okay", "ya": "you", "til": "until", "untill": "until",
    "goin": "going", "doin": "doing", "aroun": "around", "scuse": "excuse",
    "play+dough": "playdoh", "playdoh": "playdoh", "play_doh": "playdoh", "ninight": "night night",
    "whad": "what", "bandaid": "band_aid", "babys": "babies", "alrighty": "alright",
    "alrigthy": "alright", "grocerys": "groceries", "seatbelt": "seat belt",
    "earring": "ear ring", "earrings": "ear rings", "playroom": "play room",
    "playrooms": "play rooms", "woofwoof": "woof woof", "woof+woof": "woof woof",
    "woof+woof+woof": "woof woof woof", "woof_woof": "woof woof",
    "woof_woof_woof": "woof woof woof", "woof_woof_woof_woof": "woof woof woof woof",
    "snowman": "snow man", "snow_man": "snow man", "dere": "there", "potatoe": "potato",
    "potatoes": "potatos",
    # diminutives
    "doggy": "doggie", "puppys": "puppies", "birdy": "birdie", "kitty": "kittie",
    "kittys": "kitties",
    # contractions
    "what'dya": "what do you", "wha'dyou": "what do you", "wha'does": "what does",
    "cann't": "can not", "whyn't": "why do not you", "d'you": "do you", "c'mon": "come on",
    "c'mere": "come here", "com'ere": "come here", "d'ya": "do you", "y'know": "you know",
    "'cause": "because", "s'more": "some more", "y'wanna": "you want to",
    "mommy'll": "mommy will", "daddy'll": "daddy will", "this'll": "this will",
    # underscores
    "have_to": "have to", "has_to": "has to", "got_to": "got to", "lots_of": "lots of",
    "a_lot_of": "a lot of", "a_lot": "a lot", "all_gone": "all gone", "so_that": "so that",
    "next_to": "next to", "no_no": "no no", "each_other": "each other", "as_soon_as": "as soon as",
    "ought_to": "ought to", "come_on": "come on", "oink_oink": "oink oink", "oh_no": "oh no",
    "all_done": "all done", "quack_quack": "quack quack", "how_about": "how about",
    "because_of": "because of", "peep_peep": "peep peep", "laa_laa": "laa laa",
    "what_about": "what about", "sort_of": "sort of",
    # "aha"
    "uhoh": "aha", "uhuh": "aha", "ahhah": "aha", "uhhum": "aha", "ummhm": "aha", "umhum": "aha",
    "hmhm": "aha", "uhhuh": "aha",
}


def transcript_files() -> list[str]:
    """Manifest names of the staged transcript CSVs, sorted (21 corpora)."""
    return sorted(n for n in manifest() if n.startswith(TRANSCRIPT_PREFIX) and n.endswith(".csv"))


def end_mark(gloss: str, utterance_type: str) -> str:
    """``?`` for question-like openings and question types, ``!`` for imperatives, else ``.``.

    The openings are tested on the merged, not yet lower-cased gloss, as the pipeline does.
    """
    if (gloss.startswith("what") and not gloss.startswith("what a ")) or \
            gloss.startswith(QUESTION_OPENINGS):
        return "?"
    if utterance_type in QUESTION_TYPES:
        return "?"
    if utterance_type in EXCLAMATION_TYPES:
        return "!"
    return "."


def clean_utterance(gloss: str, utterance_type: str) -> str:
    """One childes-db gloss as an AO-CHILDES sentence: merges, end mark, lower case, spelling."""
    for string, merged in MERGES.items():
        gloss = gloss.replace(string, merged)
    words = []
    for word in f"{gloss} {end_mark(gloss, utterance_type)}".split():
        word = word.lower()
        word = SPELLING.get(word, word).replace("+", " ").replace("_", " ")
        words.extend(SPEAKER_CODES.get(word, word).split())
    return " ".join(words)


def read_transcripts() -> pd.DataFrame:
    """Every row of the staged transcript CSVs (the columns the pipeline uses, plus ``corpus``)."""
    frames = []
    for name in transcript_files():
        frame = pd.read_csv(data_path(name), usecols=list(COLUMNS), dtype={"gloss": str},
                            keep_default_na=False, na_values={"target_child_age": ["NA", ""]})
        frame["corpus"] = name[len(TRANSCRIPT_PREFIX):-len(".csv")]
        frames.append(frame)
    return pd.concat(frames, ignore_index=True)


def select_utterances(rows: pd.DataFrame) -> pd.DataFrame:
    """The adult utterances AO-CHILDES keeps, in age / transcript / utterance order."""
    keep = (rows["target_child_age"].notna()
            & (rows["target_child_age"] <= MAX_DAYS)
            & (rows["num_tokens"] >= MIN_NUM_TOKENS)
            & ~rows["speaker_role"].isin(BAD_SPEAKER_ROLES)
            & rows["collection_name"].isin(COLLECTIONS)
            & ~rows["gloss"].str.contains(UNTRANSCRIBED))
    kept = rows[keep]
    return kept.sort_values(["target_child_age", "transcript_id", "utterance_order"],
                            kind="stable").reset_index(drop=True)


@dataclass(frozen=True)
class AOChildes:
    """The processed corpus, one utterance per entry, in AO-CHILDES order.

    ``sentences[i]`` came from transcript ``transcript_ids[i]`` of corpus ``corpora[i]`` at child
    age ``ages[i]`` (days); ``raw_words`` is the whitespace word count of the raw glosses.
    """

    sentences: tuple[str, ...]
    transcript_ids: tuple[int, ...]
    ages: tuple[float, ...]
    corpora: tuple[str, ...]
    source_transcript_ids: frozenset  # every transcript in the staged CSVs, kept or not
    raw_words: int

    def counts(self) -> dict:
        """Utterances, words (without end marks), transcripts, corpora, ages; before and after
        BabyBERTa's length filter."""
        kept = self.training_sentences()
        return {
            "utterances": len(self.sentences),
            "raw_words": self.raw_words,
            "words": sum(len(s.split()) - 1 for s in self.sentences),
            "transcripts": len(set(self.transcript_ids)),
            "corpora": len(set(self.corpora)),
            "min_age_days": min(self.ages),
            "max_age_days": max(self.ages),
            "training_sentences": len(kept),
            "training_words": sum(len(s.split()) - 1 for s in kept),
        }

    def training_sentences(self, min_tokens: int = MIN_SENTENCE_TOKENS) -> list[str]:
        """Sentences with at least ``min_tokens`` whitespace tokens (end mark included), in order."""
        return [s for s in self.sentences if len(s.split()) >= min_tokens]


@lru_cache(maxsize=1)
def load_aochildes() -> AOChildes:
    """Build the corpus from the staged transcripts (a few seconds; kept for the process)."""
    rows = read_transcripts()
    kept = select_utterances(rows)
    sentences = tuple(clean_utterance(g, t) for g, t in zip(kept["gloss"], kept["type"]))
    return AOChildes(
        sentences=sentences,
        transcript_ids=tuple(int(t) for t in kept["transcript_id"]),
        ages=tuple(float(a) for a in kept["target_child_age"]),
        corpora=tuple(kept["corpus"]),
        source_transcript_ids=frozenset(int(t) for t in rows["transcript_id"].unique()),
        raw_words=int(kept["gloss"].str.split().str.len().sum()),
    )


@dataclass(frozen=True)
class Validation:
    """Held-out sentences from transcripts the training corpus does not contain."""

    sentences: tuple[str, ...]
    rows_total: int
    rows_dropped: int
    transcripts_dropped: int


def load_validation(exclude_transcripts: frozenset | set | None = None) -> Validation:
    """The held-out CSV minus rows whose ``transcript_id`` is in ``exclude_transcripts``
    (default: every transcript of the staged training CSVs)."""
    if exclude_transcripts is None:
        exclude_transcripts = load_aochildes().source_transcript_ids
    frame = pd.read_csv(data_path(VALIDATION_FILE), dtype={"text": str}, keep_default_na=False)
    missing = {"text", "transcript_id"} - set(frame.columns)
    if missing:
        raise ValueError(f"{VALIDATION_FILE} lacks column(s) {sorted(missing)}; "
                         f"expected text,transcript_id,age_in_months,bucket")
    overlap = frame["transcript_id"].isin(exclude_transcripts)
    kept = frame.loc[~overlap, "text"].str.strip()
    kept = kept[kept != ""]
    return Validation(sentences=tuple(kept), rows_total=len(frame), rows_dropped=int(overlap.sum()),
                      transcripts_dropped=int(frame.loc[overlap, "transcript_id"].nunique()))
