// The translator's text side in JavaScript: normalization, WordPiece, detokenization.
//
// It equals keras_attention.translation.SubwordTokenizer (tensorflow-text's
// FastWordpieceTokenizer in its end-to-end mode) for the same vocabulary:
//
// 1. normalize: Unicode NFKC, then, when the vocabulary is lowercased, full
//    Unicode lowercasing (String.prototype.toLowerCase, as ICU's root locale).
// 2. words: split on Unicode White_Space; every punctuation character (ASCII
//    punctuation, Unicode category P*) and CJK ideograph is a word of its own.
// 3. WordPiece: greedy longest-match-first over code points; a piece that
//    continues a word carries the suffix indicator ("##"); a word that cannot
//    be cut, or longer than maxBytesPerWord bytes of UTF-8, is one [UNK].
// 4. detokenize: stop at [END], drop reserved ids and ids outside the
//    vocabulary, glue "##" pieces onto the word before them, join words with
//    single spaces ("l ' homme porte un t - shirt .").
//
// No dependency: it runs in the browser and in Node.

// Unicode's White_Space property, written out (the set FastWordpieceTokenizer
// splits on; \s in a regular expression also holds U+FEFF, which is not one).
const WHITE_SPACE = new Set(
  [
    0x09, 0x0a, 0x0b, 0x0c, 0x0d, 0x20, 0x85, 0xa0, 0x1680, 0x2000, 0x2001, 0x2002, 0x2003,
    0x2004, 0x2005, 0x2006, 0x2007, 0x2008, 0x2009, 0x200a, 0x2028, 0x2029, 0x202f, 0x205f,
    0x3000,
  ].map((cp) => String.fromCodePoint(cp)),
);

// CJK ideographs, which BERT-style tokenizers make words of their own.
const CJK_RANGES = [
  [0x4e00, 0x9fff],
  [0x3400, 0x4dbf],
  [0x20000, 0x2a6df],
  [0x2a700, 0x2b73f],
  [0x2b740, 0x2b81f],
  [0x2b820, 0x2ceaf],
  [0xf900, 0xfaff],
  [0x2f800, 0x2fa1f],
];

const UNICODE_PUNCTUATION = /^\p{P}$/u;
const UTF8 = new TextEncoder();

/** True for a character that becomes a word of its own. */
export function isPunctuation(char) {
  const cp = char.codePointAt(0);
  if ((cp >= 33 && cp <= 47) || (cp >= 58 && cp <= 64) || (cp >= 91 && cp <= 96)) return true;
  if (cp >= 123 && cp <= 126) return true;
  // Every ASCII punctuation character is in the ranges above: the regular
  // expression and the CJK table are for the rest.
  if (cp < 128) return false;
  if (UNICODE_PUNCTUATION.test(char)) return true;
  return CJK_RANGES.some(([low, high]) => cp >= low && cp <= high);
}

/** True for a Unicode White_Space character. */
export function isWhiteSpace(char) {
  return WHITE_SPACE.has(char);
}

/** Splits a vocabulary file's text into tokens (one per line, id = line number). */
export function parseVocabulary(text) {
  const tokens = text.split("\n");
  if (tokens.length && tokens[tokens.length - 1] === "") tokens.pop();
  return tokens;
}

function checkNoNul(text) {
  const position = text.indexOf("\u0000");
  if (position >= 0) {
    throw new RangeError(
      `The text holds the character U+0000 at position ${position}; ` +
        "the training tokenizer stops reading there. Remove it.",
    );
  }
}

export class WordpieceTokenizer {
  /**
   * @param {string[]} vocab tokens, id = index, reserved tokens first.
   * @param {object} options
   * @param {boolean} options.lowerCase lowercase after NFKC.
   * @param {number[]} [options.reservedIds] ids of [PAD], [UNK], [START], [END].
   * @param {string} [options.suffixIndicator] prefix of a continuing piece.
   * @param {number} [options.maxBytesPerWord] a longer word (UTF-8) is one [UNK].
   */
  constructor(
    vocab,
    { lowerCase, reservedIds = [0, 1, 2, 3], suffixIndicator = "##", maxBytesPerWord = 100 },
  ) {
    if (typeof lowerCase !== "boolean") {
      throw new TypeError(`lowerCase must be a boolean; received ${JSON.stringify(lowerCase)}`);
    }
    this.vocab = Array.from(vocab);
    this.ids = new Map(this.vocab.map((token, id) => [token, id]));
    if (this.ids.size !== this.vocab.length) {
      throw new Error("The vocabulary repeats a token; ids would be ambiguous.");
    }
    this.lowerCase = lowerCase;
    [this.padId, this.unkId, this.startId, this.endId] = reservedIds;
    this.reserved = reservedIds.length;
    this.suffixIndicator = suffixIndicator;
    this.maxBytesPerWord = maxBytesPerWord;
  }

  /**
   * The tokenizer of one side ("source" or "target") of an exported
   * translator.json, with the text of its vocabulary file.
   */
  static fromConfig(config, side, vocabText) {
    const entry = config[side];
    if (!entry) throw new Error(`translator.json has no "${side}" entry`);
    const vocab = parseVocabulary(vocabText);
    if (entry.vocab_size !== undefined && vocab.length !== entry.vocab_size) {
      throw new Error(
        `${entry.vocab_file} has ${vocab.length} tokens; translator.json says ${entry.vocab_size}`,
      );
    }
    return new WordpieceTokenizer(vocab, {
      lowerCase: entry.lower_case,
      reservedIds: [config.pad_id, config.unk_id, config.start_id, config.end_id],
      suffixIndicator: config.suffix_indicator,
      maxBytesPerWord: config.max_bytes_per_word,
    });
  }

  get vocabSize() {
    return this.vocab.length;
  }

  /** NFKC, then lowercasing when the vocabulary is lowercased. */
  normalize(text) {
    const normalized = text.normalize("NFKC");
    return this.lowerCase ? normalized.toLowerCase() : normalized;
  }

  /** Splits normalized text on white space and around punctuation. */
  words(text) {
    const words = [];
    let current = "";
    for (const char of text) {
      const space = WHITE_SPACE.has(char);
      if (space || isPunctuation(char)) {
        if (current) words.push(current);
        current = "";
        if (!space) words.push(char);
      } else {
        current += char;
      }
    }
    if (current) words.push(current);
    return words;
  }

  /** The ids of one word: greedy longest-match-first pieces, or one [UNK]. */
  wordIds(word) {
    if (UTF8.encode(word).length > this.maxBytesPerWord) return [this.unkId];
    const chars = Array.from(word); // code points, as Python's str
    const ids = [];
    let start = 0;
    while (start < chars.length) {
      const prefix = start ? this.suffixIndicator : "";
      let found = false;
      for (let end = chars.length; end > start; end--) {
        const id = this.ids.get(prefix + chars.slice(start, end).join(""));
        if (id !== undefined) {
          ids.push(id);
          start = end;
          found = true;
          break;
        }
      }
      if (!found) return [this.unkId];
    }
    return ids;
  }

  /**
   * Raw text → ids (no [START] / [END]).
   *
   * Throws on U+0000: tensorflow-text's FastWordpieceTokenizer may stop reading
   * at it (it dropped the rest of a sentence here), so no ids could equal the
   * training tokenizer's.
   */
  tokenize(text) {
    checkNoNul(text);
    return this.words(this.normalize(text)).flatMap((word) => this.wordIds(word));
  }

  /**
   * Raw text → {ids, words}: for each word, its text, its ids and, when it
   * became [UNK], why: the characters no vocabulary token holds, or its size.
   */
  analyze(text) {
    checkNoNul(text);
    const words = this.words(this.normalize(text)).map((word) => {
      const ids = this.wordIds(word);
      const entry = { word, ids };
      if (ids.length === 1 && ids[0] === this.unkId) {
        const bytes = UTF8.encode(word).length;
        entry.unknownCharacters = Array.from(new Set(word)).filter((c) => !this.knowsCharacter(c));
        if (bytes > this.maxBytesPerWord) entry.tooLong = bytes;
      }
      return entry;
    });
    return { ids: words.flatMap((w) => w.ids), words };
  }

  /** True when a vocabulary token is this character, alone or after "##". */
  knowsCharacter(char) {
    return this.ids.has(char) || this.ids.has(this.suffixIndicator + char);
  }

  /** Ids → text: stops at [END], drops reserved ids, glues "##" pieces. */
  detokenize(ids) {
    const words = [];
    for (const value of ids) {
      const id = Number(value);
      if (id === this.endId) break;
      if (!Number.isInteger(id) || id < this.reserved || id >= this.vocab.length) continue;
      const token = this.vocab[id];
      if (token.startsWith(this.suffixIndicator) && words.length) {
        words[words.length - 1] += token.slice(this.suffixIndicator.length);
      } else {
        words.push(token);
      }
    }
    return words.join(" ");
  }

  /** Ids → their token strings (axis labels of an attention map). */
  pieces(ids) {
    return Array.from(ids, (id) => this.vocab[Number(id)] ?? `<${id}>`);
  }
}
