/* The pre-tokenizers of byte-level BPE vocabularies, as data: each `tokenizer.ggml.pre`
 * name llama.cpp's vocabulary loader accepts → the list of regular expressions it splits
 * text with (applied one after another, each splitting the pieces the previous ones left),
 * and the flags it sets for that type (ignore_merges, add_bos, clean_spaces, no BOS).
 *
 * The expressions are llama.cpp's own (its loader's source, read as data): where llama.cpp
 * rewrote a tokenizer.json expression for its regex engine (no (?i:...), no \p{Lu}), the
 * rewritten form is what runs here, so a GGUF tokenizes as in llama.cpp. `hf` holds the
 * tokenizer.json form of the same split where it differs; the converter uses it to name the
 * pre-tokenizer of a Hugging Face tokenizer (llama.cpp's converter hashes a tokenization
 * instead; matching the expressions names the same type for the tokenizers it knows). */
#include <string.h>

#include "llm/tokenizer/tokenizer.h"

/* GPT-2's split without its final `|\s+`: text no expression matches stays a piece of its
 * own anyway, which is what that alternative would make of it. */
#define RX_GPT2 "'s|'t|'re|'ve|'m|'ll|'d| ?\\p{L}+| ?\\p{N}+| ?[^\\s\\p{L}\\p{N}]+|\\s+(?!\\S)"
#define RX_CONTRACTIONS "(?:'[sS]|'[tT]|'[rR][eE]|'[vV][eE]|'[mM]|'[lL][lL]|'[dD])"
#define RX_CONTRACTIONS_HF "(?i:'s|'t|'re|'ve|'m|'ll|'d)"
#define RX_LLAMA3_TAIL "|[^\\r\\n\\p{L}\\p{N}]?\\p{L}+|\\p{N}{1,3}| ?[^\\s\\p{L}\\p{N}]+[\\r\\n]*|\\s*[\\r\\n]+|\\s+(?!\\S)|\\s+"
#define RX_QWEN2_TAIL "|[^\\r\\n\\p{L}\\p{N}]?\\p{L}+|\\p{N}| ?[^\\s\\p{L}\\p{N}]+[\\r\\n]*|\\s*[\\r\\n]+|\\s+(?!\\S)|\\s+"
#define RX_LLAMA3 RX_CONTRACTIONS RX_LLAMA3_TAIL
#define RX_QWEN2 RX_CONTRACTIONS RX_QWEN2_TAIL
#define RX_BLOOM " ?[^(\\s|.,!?…。，、।۔،)]+"
/* letters split by case; llama.cpp's form of \p{Lu}... (lookahead for "a letter") */
#define RX_UPPER_LOWER "((?=[\\p{L}])([^a-z]))*((?=[\\p{L}])([^A-Z]))+"
#define RX_UPPER_LOWER2 "((?=[\\p{L}])([^a-z]))+((?=[\\p{L}])([^A-Z]))*"
#define RX_HF_UPPER_LOWER "[\\p{Lu}\\p{Lt}\\p{Lm}\\p{Lo}\\p{M}]*[\\p{Ll}\\p{Lm}\\p{Lo}\\p{M}]+"
#define RX_HF_UPPER_LOWER2 "[\\p{Lu}\\p{Lt}\\p{Lm}\\p{Lo}\\p{M}]+[\\p{Ll}\\p{Lm}\\p{Lo}\\p{M}]*"
#define RX_LEAD "[^\\r\\n\\p{L}\\p{N}]?"
#define RX_DEEPSEEK3 \
    "[!\"#$%&'()*+,\\-./:;<=>?@\\[\\\\\\]^_`{|}~][A-Za-z]+|[^\r\n\\p{L}\\p{P}\\p{S}]?[\\p{L}\\p{M}]+| ?[\\p{P}\\p{S}]+[\r\n]*|\\s*[\r\n]+|\\s+(?!\\S)|\\s+"

#define LIST(...) ((const char *const[]){__VA_ARGS__, NULL})

/* Characters that Unicode normalization would replace (Greek extended and letterlike
 * singletons such as U+212A KELVIN SIGN) are written as \x{...}, so that no editor's or
 * tool's NFC can turn a range of deepseek-llm's class upside down. */

static const ak__pretok_type k_types[] = {
    {LIST("default"),
     LIST("[\\p{P}\\$\\+<=>\\^~\\|]+", RX_GPT2, "\\p{N}+", "[0-9][0-9][0-9]"), NULL, 0},
    {LIST("gpt-2", "mpt", "olmo", "jais", "phi-2", "jina-es", "jina-de", "gigachat",
          "jina-v2-es", "jina-v2-de", "a.x-4.0", "mellum", "modern-bert", "exaone4"),
     LIST(RX_GPT2), LIST(RX_GPT2 "|\\s+"), 0},
    {LIST("trillion", "granite-docling"), LIST(RX_GPT2), NULL, AK_PRE_NO_CLEAN},
    {LIST("llama-bpe", "llama3", "llama-v3", "falcon3", "falcon-h1", "pixtral", "midm-2.0",
          "lfm2", "jina-v5-nano"),
     LIST(RX_LLAMA3), LIST(RX_CONTRACTIONS_HF RX_LLAMA3_TAIL),
     AK_PRE_IGNORE_MERGES | AK_PRE_ADD_BOS},
    {LIST("dbrx", "smaug-bpe"), LIST(RX_LLAMA3), NULL, 0},
    {LIST("chatglm-bpe", "glm4"), LIST(RX_LLAMA3), NULL, AK_PRE_NO_BOS},
    {LIST("qwen2", "deepseek-r1-qwen", "kormo", "f2llmv2"), LIST(RX_QWEN2),
     LIST(RX_CONTRACTIONS_HF RX_QWEN2_TAIL), AK_PRE_NO_CLEAN},
    {LIST("stablelm2", "megrez"), LIST(RX_QWEN2), NULL, 0},
    {LIST("hunyuan", "solar-open"), LIST(RX_QWEN2), NULL, AK_PRE_NO_CLEAN},
    {LIST("qwen35"),
     LIST(RX_CONTRACTIONS "|[^\\r\\n\\p{L}\\p{N}]?[\\p{L}\\p{M}]+|\\p{N}| ?[^\\s\\p{L}\\p{M}\\p{N}]+[\\r\\n]*|\\s*[\\r\\n]+|\\s+(?!\\S)|\\s+"),
     NULL, AK_PRE_NO_CLEAN},
    {LIST("deepseek-llm"),
     LIST("[\r\n]",
          "\\s?[A-Za-zµÀ-ÖØ-öø-ƺƼ-ƿǄ-ʓʕ-ʯͰ-ͳͶͷͻ-ͽͿΆΈ-ΊΌΎ-ΡΣ-ϵϷ-ҁҊ-ԯԱ-ՖႠ-ჅᎠ-Ᏽᏸ-ᏽᲐ-ᲺᲽ-Ჿᴀ-ᴫᵫ-ᵷᵹ-ᶚḀ-ἕἘ-Ἕἠ-ὅὈ-Ὅὐ-ὗὙὛὝὟ-\\x{1F7D}ᾀ-ᾴᾶ-ᾼ\\x{1FBE}ῂ-ῄῆ-ῌῐ-\\x{1FD3}ῖ-\\x{1FDB}ῠ-Ῥῲ-ῴῶ-ῼℂℇℊ-ℓℕℙ-ℝℤ\\x{2126}ℨ\\x{212A}-ℭℯ-ℴℹℼ-ℿⅅ-ⅉⅎↃↄⰀ-ⱻⱾ-ⳤⳫ-ⳮⳲⳳꙀ-ꙭꚀ-ꚛꜢ-ꝯꝱ-ꞇꞋ-ꞎꭰ-ꮿﬀ-ﬆﬓ-ﬗＡ-Ｚａ-ｚ𐐀-𐑏𐒰-𐓓𐓘-𐓻𐲀-𐲲𐳀-𐳲𑢠-𑣟𞤀-𞥃]+",
          "\\s?[!-/:-~！-／：-～‘-‟　-。]+", "\\s+$", "[一-龥ࠀ-一가-퟿]+", "\\p{N}+"),
     NULL, AK_PRE_NO_CLEAN},
    {LIST("deepseek-coder"),
     LIST("[\r\n]", "\\s?\\p{L}+", "\\s?\\p{P}+", "[一-龥ࠀ-一가-퟿]+", "\\p{N}"), NULL,
     AK_PRE_NO_CLEAN},
    {LIST("deepseek-v3", "hunyuan-dense", "joyai-llm", "hy_v4"),
     LIST("\\p{N}{1,3}", "[一-龥぀-ゟ゠-ヿ]+", RX_DEEPSEEK3), NULL, AK_PRE_NO_CLEAN},
    {LIST("spark2_5"),
     LIST("\\p{N}{1,3}", "[一-龥぀-ゟ゠-ヿ]+",
          "[!\"#$%&'()*+,\\-./:;<=>?@\\[\\\\\\]^_`{|}~][A-Za-z]+|[^\r\n\\p{L}\\p{P}\\p{S}]?[\\p{L}\\p{M}]+| ?[\\p{P}\\p{S}]+|[\r\n]|\\s+(?!\\S)|\\s+",
          "\\p{N}"),
     NULL, AK_PRE_NO_CLEAN},
    {LIST("falcon"), LIST("[\\p{P}\\$\\+<=>\\^~\\|`]+", RX_GPT2, "[0-9][0-9][0-9]"), NULL, 0},
    {LIST("starcoder", "refact", "codeshell", "exaone", "minerva-7b", "mellum2"),
     LIST("\\p{N}", RX_GPT2), NULL, 0},
    {LIST("command-r", "smollm"), LIST("\\p{N}", RX_GPT2), NULL, AK_PRE_NO_CLEAN},
    {LIST("bloom", "gpt3-finnish"), LIST(RX_BLOOM), NULL, 0},
    {LIST("poro-chat"), LIST(RX_BLOOM), NULL, AK_PRE_NO_CLEAN},
    {LIST("viking"), LIST(RX_BLOOM, "\\p{N}"), NULL, AK_PRE_NO_CLEAN},
    {LIST("tekken"),
     LIST(RX_LEAD RX_UPPER_LOWER "|" RX_LEAD RX_UPPER_LOWER2
          "|\\p{N}| ?[^\\s\\p{L}\\p{N}]+[\\r\\n/]*|\\s*[\\r\\n]+|\\s+(?!\\S)|\\s+"),
     LIST(RX_LEAD RX_HF_UPPER_LOWER "|" RX_LEAD RX_HF_UPPER_LOWER2
          "|\\p{N}| ?[^\\s\\p{L}\\p{N}]+[\\r\\n/]*|\\s*[\\r\\n]+|\\s+(?!\\S)|\\s+"),
     AK_PRE_IGNORE_MERGES | AK_PRE_ADD_BOS | AK_PRE_NO_CLEAN},
    {LIST("gpt-4o", "llama4", "kanana2", "talkie", "minimax-m2"),
     LIST(RX_LEAD RX_UPPER_LOWER RX_CONTRACTIONS "?|" RX_LEAD RX_UPPER_LOWER2 RX_CONTRACTIONS
          "?|\\p{N}{1,3}| ?[^\\s\\p{L}\\p{N}]+[\\r\\n/]*|\\s*[\\r\\n]+|\\s+(?!\\S)|\\s+"),
     LIST(RX_LEAD RX_HF_UPPER_LOWER RX_CONTRACTIONS_HF "?|" RX_LEAD RX_HF_UPPER_LOWER2
          RX_CONTRACTIONS_HF "?|\\p{N}{1,3}| ?[^\\s\\p{L}\\p{N}]+[\\r\\n/]*|\\s*[\\r\\n]+|\\s+(?!\\S)|\\s+"),
     AK_PRE_NO_CLEAN},
    {LIST("chameleon"),
     LIST("<sentinel:[0-9]+>", "(IMGIMG)((A|B|C|D|E|F|G|H|I){1,4})Z", "([\\t\\n]|    |  )",
          "\\p{N}", "[\\p{P}!-/:-@\\[-`{-~]", RX_GPT2),
     NULL, AK_PRE_ADD_BOS | AK_PRE_NO_CLEAN},
    {LIST("superbpe"), LIST("\\p{N}+", "(?=(\\d{3})+(?!\\d))"), NULL, AK_PRE_NO_CLEAN},
    {LIST("bailingmoe", "bailingmoe2", "llada-moe"),
     LIST("'(?:[sSdDmMtT]|[lL][lL]|[vV][eE]|[rR][eE])|[^\\r\\n\\p{L}\\p{N}]?\\p{L}+|\\p{N}| ?[^\\s\\p{L}\\p{N}]+[\\r\\n]*|\\s*[\\r\\n]|\\s+(?!\\S)|\\s+"),
     NULL, AK_PRE_NO_CLEAN},
    {LIST("seed-coder"),
     LIST(RX_CONTRACTIONS "|[^\\r\\n\\p{L}\\p{N}]?\\p{L}+|\\p{N}{1}| ?[^\\s\\p{L}\\p{N}\\r\\n]+|\\s*[\\r\\n]+|\\s+(?!\\S)|\\s+"),
     NULL, AK_PRE_NO_CLEAN},
    {LIST("ufakzeka"),
     LIST("[^\\r\\n\\p{L}\\p{N}]?\\p{L}+|\\p{N}| ?[^\\s\\p{L}\\p{N}]+[\\r\\n]*|\\s*[\\r\\n]+|\\s+(?!\\S)|\\s+"),
     NULL, AK_PRE_NO_CLEAN},
    {LIST("grok-2"), LIST(RX_QWEN2), NULL, AK_PRE_NO_CLEAN},
    {LIST("laguna"), LIST("[^\\n]+|[\\n]+", RX_QWEN2), NULL, AK_PRE_NO_CLEAN},
    {LIST("exaone-moe"),
     LIST(RX_CONTRACTIONS "|[^\\r\\n\\p{L}\\p{N}]?(?:\\p{L}\\p{M}*(?: \\p{L}\\p{M}*)*)+|\\p{N}| ?[^\\s\\p{L}\\p{N}]+[\\r\\n/]?|\\s*[\\r\\n]|\\s+(?!\\S)|\\s+"),
     NULL, 0},
    {LIST("minicpm5"),
     LIST("\\p{N}{1,3}", RX_CONTRACTIONS "|[^\\r\\n\\p{L}\\p{N}]?\\p{L}+|\\p{N}+| ?[^\\s\\p{L}\\p{N}]+[\\r\\n]*|\\s*[\\r\\n]+|\\s+(?!\\S)|\\s+"),
     NULL, AK_PRE_IGNORE_MERGES},
    {LIST("youtu"),
     LIST("[가-힣ㄱ-ㆎ]+|[！…“”‘’—：；，、-〿︰-﹏]+|[ㄅ-ㄯ]+|[一-龥぀-ゟ゠-ヿ]+",
          RX_LEAD "[\\p{Lu}\\p{Lt}\\p{Lm}\\p{Lo}\\p{M}]*[\\p{Ll}\\p{Lm}\\p{Lo}\\p{M}]+" RX_CONTRACTIONS
          "?|" RX_LEAD "[\\p{Lu}\\p{Lt}\\p{Lm}\\p{Lo}\\p{M}]+[\\p{Ll}\\p{Lm}\\p{Lo}\\p{M}]*" RX_CONTRACTIONS
          "?|\\p{N}| ?[^\\s\\p{L}\\p{N}]+[\\r\\n/]*|\\s*[\\r\\n]+|\\s+(?!\\S)|\\s+"),
     NULL, AK_PRE_IGNORE_MERGES | AK_PRE_NO_CLEAN},
    {LIST("granite-embed-multi-97m"),
     LIST(RX_LEAD "((?=[\\p{L}\\p{M}])([^a-z]))*((?=[\\p{L}\\p{M}])([^A-Z]))+" RX_CONTRACTIONS
          "?|" RX_LEAD "((?=[\\p{L}\\p{M}])([^a-z]))+((?=[\\p{L}\\p{M}])([^A-Z]))*" RX_CONTRACTIONS
          "?|\\p{N}{1,3}| ?[^\\s\\p{L}\\p{N}]+[\\r\\n/]*|\\s*[\\r\\n]+|\\s+(?!\\S)|\\s+"),
     NULL, AK_PRE_IGNORE_MERGES | AK_PRE_NO_CLEAN},
};

/* Types llama.cpp splits with code of its own rather than expressions (or without GPT-2's
 * byte alphabet), and tiny_aya/cohere2moe, whose digit grouping by lookahead and \b
 * llama.cpp's regex engine runs differently from PCRE2 (measured: 5 of 300 test strings
 * differ): refused by name. */
static const char *const k_unsupported[] = {
    "kimi-k2",   "afmoe",        "gemma4", "granite-embed-multi-311m", "sarvam-moe",
    "whitespace", "jina-v1-en", "jina-v2-code", "roberta-bpe", "jais-2", "tiny_aya",
    "cohere2moe", NULL};

static int name_is(const char *a, const char *s, size_t len) {
    return strlen(a) == len && memcmp(a, s, len) == 0;
}

const ak__pretok_type *ak__pretok_type_find(const char *name, size_t len, int *unsupported) {
    *unsupported = 0;
    for (size_t i = 0; i < sizeof k_types / sizeof k_types[0]; i++)
        for (const char *const *n = k_types[i].names; *n; n++)
            if (name_is(*n, name, len)) return &k_types[i];
    for (const char *const *n = k_unsupported; *n; n++)
        if (name_is(*n, name, len)) *unsupported = 1;
    return NULL;
}

static int same_list(const char *const *a, const char *const *b, size_t n) {
    size_t i = 0;
    for (; a[i] && i < n; i++)
        if (strcmp(a[i], b[i]) != 0) return 0;
    return i == n && !a[i];
}

const ak__pretok_type *ak__pretok_type_match(const char *const *regexes, size_t n,
                                             int ignore_merges) {
    const ak__pretok_type *hit = NULL;
    for (size_t i = 0; i < sizeof k_types / sizeof k_types[0]; i++) {
        const ak__pretok_type *t = &k_types[i];
        if (!same_list(t->hf ? t->hf : t->regexes, regexes, n) &&
            !same_list(t->regexes, regexes, n))
            continue;
        /* several types share one split; the flags tell them apart (llama-bpe ignores merges) */
        if (((t->flags & AK_PRE_IGNORE_MERGES) != 0) == (ignore_merges != 0)) return t;
        if (!hit) hit = t;
    }
    return hit;
}
