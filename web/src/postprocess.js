// The translator's French output as the command line prints it.
//
// The page's side of `postprocess` in keras_attention/translation/postprocess.py
// (which calls sacremoses' Moses detokenizer): the tokenizer's text,
// "un homme en t - shirt bleu fait du vélo dans la rue .", becomes
// "Un homme en t-shirt bleu fait du vélo dans la rue.". The same steps, in the
// same order:
//
// 1. whitespace runs become one space;
// 2. a hyphen between two letters or digits, a decimal point or comma between
//    two digits, and an apostrophe between two letters or digits are joined to
//    both sides ("t - shirt", "1 , 5", "l ' homme", "aujourd ' hui");
// 3. Moses' French detokenization rules, token by token (below);
// 4. with `capitalize`, the first letter upper-cased.
//
// tests/test_web_postprocess.py runs this file in Node against the Python
// function on every French sentence of test_2016_flickr and test_2017_flickr.

// Python's `[^\W_]` (a letter or a digit) and `\d` (a decimal digit).
const WORD = String.raw`[\p{L}\p{N}]`;
const HYPHEN = new RegExp(String.raw`(?<=${WORD}) - (?=${WORD})`, "gu");
const DECIMAL = /(?<=\p{Nd}) ([.,]) (?=\p{Nd})/gu;
const APOSTROPHE = new RegExp(String.raw`(?<=${WORD}) (['’]) (?=${WORD})`, "gu");
// What Python's str.split() splits on (str.isspace()).
const SPACES = /[\t\n\v\f\r\x1c-\x1f \x85\xa0\u1680\u2000-\u200a\u2028\u2029\u202f\u205f\u3000]+/u;

// Moses' token classes: currency and opening brackets attach to the next
// token; closing punctuation to the previous one (in French with a space
// before ? ! : ; \ %); an elision ("l'") to a next token starting with a
// letter; quotes alternate between opening and closing.
const CURRENCY_OR_OPENING = /^[\p{Sc}([{¿¡]+$/u;
const CLOSING = /^[,.?!:;\\%}\])]+$/u;
const FRENCH_SPACED = /^[?!:;\\%]$/u;
const ELISION = /\p{Alphabetic}'$/u;
const STARTS_WITH_LETTER = /^\p{Alphabetic}/u;
const QUOTE = /^['"„“`]+$/u;
const DOUBLE_QUOTES = /^[„“”]+$/u;
// Moses' CJK ranges: a CJK word after a CJK word joins it.
const CJK_RANGES = [
  [0x1100, 0x11ff],
  [0x2e80, 0xa4cf],
  [0xa840, 0xa87f],
  [0xac00, 0xd7af],
  [0xf900, 0xfaff],
  [0xfe30, 0xfe4f],
  [0xff65, 0xffdc],
  [0x17000, 0x18aff],
  [0x1b000, 0x1b12f],
  [0x1b170, 0x1b2ff],
  [0x20000, 0x2ffff],
];

function isCjk(char) {
  const code = char.codePointAt(0);
  return CJK_RANGES.some(([start, end]) => start <= code && code <= end);
}

function splitWords(text) {
  return text.split(SPACES).filter((word) => word.length > 0);
}

/** Moses' detokenizer for French, on a list of tokens; returns the text. */
export function mosesDetokenizeFrench(tokens) {
  const words = splitWords(` ${tokens.join(" ")} `.replace(/ @-@ /g, "-"));
  const quotes = new Map();
  let text = "";
  let prepend = " ";
  words.forEach((word, i) => {
    if (isCjk(word)) {
      const previous = i > 0 ? Array.from(words[i - 1]).at(-1) : null;
      text += previous !== null && isCjk(previous) ? word : prepend + word;
      prepend = " ";
    } else if (CURRENCY_OR_OPENING.test(word)) {
      text += prepend + word;
      prepend = "";
    } else if (CLOSING.test(word)) {
      if (FRENCH_SPACED.test(word)) text += " ";
      text += word;
      prepend = " ";
    } else if (i <= words.length - 2 && ELISION.test(word) && STARTS_WITH_LETTER.test(words[i + 1])) {
      text += prepend + word;
      prepend = "";
    } else if (QUOTE.test(word)) {
      const kind = DOUBLE_QUOTES.test(word) ? '"' : word;
      const seen = quotes.get(kind) ?? 0;
      if (seen % 2 === 0) {
        text += prepend + word; // opening
        prepend = "";
      } else {
        text += word; // closing
        prepend = " ";
      }
      quotes.set(kind, seen + 1);
    } else {
      text += prepend + word;
      prepend = " ";
    }
  });
  return text.replace(/ {2,}/g, " ").trim();
}

/**
 * The tokenizer's French text → the text users read (see the top of this
 * file); `capitalize` upper-cases the first letter, as the command line does.
 */
export function postprocess(text, { capitalize = false } = {}) {
  let joined = splitWords(text).join(" ");
  joined = joined.replace(HYPHEN, "-").replace(DECIMAL, "$1").replace(APOSTROPHE, "$1");
  let result = mosesDetokenizeFrench(splitWords(joined));
  if (capitalize) {
    const chars = Array.from(result);
    const first = chars.findIndex((char) => /\p{L}/u.test(char));
    if (first >= 0) {
      chars[first] = chars[first].toUpperCase();
      result = chars.join("");
    }
  }
  return result;
}
