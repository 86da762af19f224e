/* Chat template tests: each format renders system + user + assistant + user exactly as
 * its reference Jinja template does under Hugging Face's apply_chat_template (expected
 * strings written by hand from the templates), detection by markers, the raise_exception
 * cases, whitespace trimming, and the buffer-size protocol. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include <cmocka.h>

#include "accelkit/llm.h"

static const ak_chat_message k_conv[] = {
    {"system", "You are a helpful assistant"},
    {"user", "Hello"},
    {"assistant", "  Hi there  "}, /* padded: shows which formats trim */
    {"user", "Who are you"},
};
#define N_CONV (sizeof k_conv / sizeof k_conv[0])

static void expect_render(const char *format, const ak_chat_message *m, size_t n, int gen,
                          const char *bos, const char *eos, const char *want) {
    char buf[1024];
    size_t len = 0;
    ak_status st = ak_chat_render(format, m, n, gen, bos, eos, buf, sizeof buf, &len);
    if (st != AK_OK) fail_msg("%s: %s", format, ak_last_error());
    assert_int_equal(len, strlen(want));
    assert_string_equal(buf, want);
}

static void test_llama2(void **state) {
    (void)state;
    expect_render("llama-2", k_conv, N_CONV, 1, "<s>", "</s>",
                  "<s>[INST] <<SYS>>\nYou are a helpful assistant\n<</SYS>>\n\nHello [/INST]"
                  " Hi there </s><s>[INST] Who are you [/INST]");
    /* no system message: no <<SYS>> block */
    expect_render("llama-2", k_conv + 1, 1, 1, "<s>", "</s>", "<s>[INST] Hello [/INST]");
}

static void test_llama3(void **state) {
    (void)state;
    expect_render("llama-3", k_conv, N_CONV, 1, "<|begin_of_text|>", "<|eot_id|>",
                  "<|begin_of_text|><|start_header_id|>system<|end_header_id|>\n\n"
                  "You are a helpful assistant<|eot_id|>"
                  "<|start_header_id|>user<|end_header_id|>\n\nHello<|eot_id|>"
                  "<|start_header_id|>assistant<|end_header_id|>\n\nHi there<|eot_id|>"
                  "<|start_header_id|>user<|end_header_id|>\n\nWho are you<|eot_id|>"
                  "<|start_header_id|>assistant<|end_header_id|>\n\n");
    expect_render("llama-3", k_conv + 1, 1, 0, "<|begin_of_text|>", NULL,
                  "<|begin_of_text|><|start_header_id|>user<|end_header_id|>\n\nHello<|eot_id|>");
}

static void test_chatml(void **state) {
    (void)state;
    expect_render("chatml", k_conv, N_CONV, 1, "<s>", "</s>",
                  "<|im_start|>system\nYou are a helpful assistant<|im_end|>\n"
                  "<|im_start|>user\nHello<|im_end|>\n"
                  "<|im_start|>assistant\n  Hi there  <|im_end|>\n"
                  "<|im_start|>user\nWho are you<|im_end|>\n"
                  "<|im_start|>assistant\n");
    expect_render("chatml", k_conv + 1, 1, 0, NULL, NULL, "<|im_start|>user\nHello<|im_end|>\n");
}

static void test_mistral(void **state) {
    (void)state;
    expect_render("mistral", k_conv, N_CONV, 1, "<s>", "</s>",
                  "<s> [INST] You are a helpful assistant\n\nHello [/INST]   Hi there  </s>"
                  " [INST] Who are you [/INST]");
}

static void test_zephyr(void **state) {
    (void)state;
    expect_render("zephyr", k_conv, N_CONV, 1, "<s>", "</s>",
                  "<|system|>\nYou are a helpful assistant</s>\n<|user|>\nHello</s>\n"
                  "<|assistant|>\n  Hi there  </s>\n<|user|>\nWho are you</s>\n<|assistant|>\n");
}

static void test_gemma(void **state) {
    (void)state;
    expect_render("gemma", k_conv, N_CONV, 1, "<bos>", "<eos>",
                  "<bos><start_of_turn>user\nYou are a helpful assistant\n\nHello<end_of_turn>\n"
                  "<start_of_turn>model\nHi there<end_of_turn>\n"
                  "<start_of_turn>user\nWho are you<end_of_turn>\n"
                  "<start_of_turn>model\n");
}

static void test_phi3(void **state) {
    (void)state;
    expect_render("phi-3", k_conv, N_CONV, 1, "<s>", "<|endoftext|>",
                  "<|system|>\nYou are a helpful assistant<|end|>\n<|user|>\nHello<|end|>\n"
                  "<|assistant|>\n  Hi there  <|end|>\n<|user|>\nWho are you<|end|>\n"
                  "<|assistant|>\n");
    /* without a generation prompt the template ends with eos */
    expect_render("phi-3", k_conv + 1, 1, 0, "<s>", "<|endoftext|>",
                  "<|user|>\nHello<|end|>\n<|endoftext|>");
}

/* Python's str.strip() (the templates' trim) also removes Unicode spaces. */
static void test_trim_unicode(void **state) {
    (void)state;
    const ak_chat_message m[] = {{"user", "\xe3\x80\x80\t x\xc2\xa0y \xe2\x80\x83\n"}};
    expect_render("llama-3", m, 1, 0, "", "",
                  "<|start_header_id|>user<|end_header_id|>\n\nx\xc2\xa0y<|eot_id|>");
    expect_render("gemma", m, 1, 0, "", "", "<start_of_turn>user\nx\xc2\xa0y<end_of_turn>\n");
}

static void test_detect(void **state) {
    (void)state;
    static const struct {
        const char *tmpl, *want;
    } cases[] = {
        {"{% if messages[0]['role'] == 'system' %}...'<<SYS>>\\n'...'[INST] '...", "llama-2"},
        {"{% set content = '<|start_header_id|>' + message['role'] %}", "llama-3"},
        {"{{'<|im_start|>' + message['role'] + '\\n'}}", "chatml"},
        {"{{ bos_token }}{% for m in messages %}{{ '[INST] ' + m['content'] + ' [/INST]' }}",
         "mistral"},
        {"{{ '<|user|>\\n' + message['content'] + eos_token }}", "zephyr"},
        {"{{ '<start_of_turn>' + role + '\\n' }}", "gemma"},
        {"{{'<|user|>\\n' + message['content'] + '<|end|>\\n'}}", "phi-3"},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        const char *f = NULL;
        assert_int_equal(ak_chat_format_detect(cases[i].tmpl, &f), AK_OK);
        assert_string_equal(f, cases[i].want);
    }
    const char *f = "x";
    assert_int_equal(ak_chat_format_detect("{{ messages }}", &f), AK_ERR_UNSUPPORTED);
    assert_null(f);
    assert_int_equal(ak_chat_format_detect(NULL, &f), AK_ERR_INVALID_ARG);
}

/* Where the reference templates raise_exception, rendering fails. */
static void test_errors(void **state) {
    (void)state;
    char buf[256];
    size_t len;
    const ak_chat_message two_users[] = {{"user", "a"}, {"user", "b"}};
    const ak_chat_message late_system[] = {{"user", "a"}, {"assistant", "b"}, {"system", "c"}};
    const ak_chat_message bad_role[] = {{"tool", "a"}};
    const ak_chat_message no_content[] = {{"user", NULL}};
    assert_int_equal(ak_chat_render("llama-2", two_users, 2, 1, "", "", buf, sizeof buf, &len),
                     AK_ERR_INVALID_ARG);
    assert_int_equal(ak_chat_render("mistral", two_users, 2, 1, "", "", buf, sizeof buf, &len),
                     AK_ERR_INVALID_ARG);
    assert_int_equal(ak_chat_render("gemma", two_users, 2, 1, "", "", buf, sizeof buf, &len),
                     AK_ERR_INVALID_ARG);
    assert_int_equal(ak_chat_render("mistral", late_system, 3, 1, "", "", buf, sizeof buf, &len),
                     AK_ERR_INVALID_ARG);
    /* formats without an alternation rule accept it */
    assert_int_equal(ak_chat_render("chatml", two_users, 2, 1, "", "", buf, sizeof buf, &len),
                     AK_OK);
    assert_int_equal(ak_chat_render("chatml", bad_role, 1, 1, "", "", buf, sizeof buf, &len),
                     AK_ERR_INVALID_ARG);
    assert_int_equal(ak_chat_render("chatml", no_content, 1, 1, "", "", buf, sizeof buf, &len),
                     AK_ERR_INVALID_ARG);
    assert_int_equal(ak_chat_render("vicuna", k_conv, N_CONV, 1, "", "", buf, sizeof buf, &len),
                     AK_ERR_INVALID_ARG);
    assert_int_equal(ak_chat_render(NULL, k_conv, N_CONV, 1, "", "", buf, sizeof buf, &len),
                     AK_ERR_INVALID_ARG);
    assert_int_equal(ak_chat_render("chatml", k_conv, N_CONV, 1, "", "", NULL, 5, &len),
                     AK_ERR_INVALID_ARG);
}

/* Size protocol: *len is always the full size; too small a buffer fails without overrun. */
static void test_size_protocol(void **state) {
    (void)state;
    size_t need = 0;
    assert_int_equal(ak_chat_render("chatml", k_conv, N_CONV, 1, NULL, NULL, NULL, 0, &need),
                     AK_ERR_INVALID_ARG);
    assert_true(need > 100);
    char buf[512];
    memset(buf, '#', sizeof buf);
    size_t len = 0;
    assert_int_equal(ak_chat_render("chatml", k_conv, N_CONV, 1, NULL, NULL, buf, need - 1, &len),
                     AK_ERR_INVALID_ARG);
    assert_int_equal(len, need);
    assert_int_equal(buf[0], '#'); /* a failing call writes nothing */
    assert_int_equal(ak_chat_render("chatml", k_conv, N_CONV, 1, NULL, NULL, buf, need, &len),
                     AK_OK);
    assert_int_equal(buf[need], '#'); /* exact fit: no room for the NUL, none written */
    assert_int_equal(ak_chat_render("chatml", k_conv, N_CONV, 1, NULL, NULL, buf, need + 1, &len),
                     AK_OK);
    assert_int_equal(buf[need], '\0');
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_llama2),  cmocka_unit_test(test_llama3),
        cmocka_unit_test(test_chatml),  cmocka_unit_test(test_mistral),
        cmocka_unit_test(test_zephyr),  cmocka_unit_test(test_gemma),
        cmocka_unit_test(test_phi3),    cmocka_unit_test(test_trim_unicode),
        cmocka_unit_test(test_detect),  cmocka_unit_test(test_errors),
        cmocka_unit_test(test_size_protocol),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
