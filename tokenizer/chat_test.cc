// ChatTemplate against HF apply_chat_template: every golden of tokenizer/testdata/
// chat_goldens.json (tools/chat_goldens/make_chat_goldens.py) is recognised from its template
// file, rendered to HF's text, and encoded to HF's ids; plus recognition, ByName and
// LoadChatTemplateText.
#include "tokenizer/chat.h"

#include <sys/stat.h>

#include <fstream>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_replace.h"
#include "absl/time/civil_time.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "nlohmann/json.hpp"
#include "tokenizer/tokenizer.h"
#include "tools/cpp/runfiles/runfiles.h"
#include "util/read_file.h"

namespace dk::tokenizer {
namespace {

using bazel::tools::cpp::runfiles::Runfiles;
using ::testing::ContainsRegex;
using ::testing::HasSubstr;

constexpr char kTemplates[] = "decodekit/tokenizer/testdata/chat_templates/";

// The test's runfiles, found once (nullptr only if the runner gives none).
const Runfiles* Files() {
  static const Runfiles* files = [] {
    std::string error;
    Runfiles* r = Runfiles::CreateForTest(&error);
    EXPECT_NE(r, nullptr) << error;
    return r;
  }();
  return files;
}

std::string Path(const std::string& rlocation) {
  return Files() == nullptr ? rlocation : Files()->Rlocation(rlocation);
}

std::string Read(const std::string& rlocation) {
  absl::StatusOr<std::string> text = ReadRegularFile(Path(rlocation), "test data");
  EXPECT_TRUE(text.ok()) << text.status();
  return text.value_or("");
}

std::string Template(const std::string& file) { return Read(kTemplates + file); }

class ChatTest : public ::testing::Test {
 protected:
  // The tokenizer each golden names (make_chat_goldens.py's docstring), loaded once.
  const Tokenizer& TokenizerFor(const std::string& key) {
    auto it = tokenizers_.find(key);
    if (it != tokenizers_.end()) return *it->second;
    const std::map<std::string, std::string> paths = {
        {"smollm2", "smollm2_135m/model.gguf"},
        {"gemma3", "gemma3_270m/model.gguf"},
        {"llama3", "decodekit/tokenizer/testdata/llama3_style_tokenizer.json"},
        {"qwen2", "decodekit/tokenizer/testdata/qwen2_style_tokenizer.json"},
    };
    auto tok = Tokenizer::Load(Path(paths.at(key)));
    EXPECT_TRUE(tok.ok()) << key << ": " << tok.status();
    return *(tokenizers_[key] = std::move(tok).value());
  }

  std::map<std::string, std::unique_ptr<Tokenizer>> tokenizers_;
};

TEST_F(ChatTest, EqualsHfOnEveryGolden) {
  const nlohmann::json goldens = nlohmann::json::parse(Read("decodekit/tokenizer/testdata/chat_goldens.json"));
  std::map<std::string, int> checked;  // template -> rendered goldens
  int errors = 0;
  for (const nlohmann::json& c : goldens.at("cases")) {
    const std::string file = c.at("template");
    const std::string what = absl::StrCat(file, " / ", c.at("conversation").get<std::string>(),
                                          " / add_generation_prompt=", c.at("add_generation_prompt").dump());
    absl::StatusOr<ChatTemplate> t = ChatTemplate::Recognize(Template(file));
    ASSERT_TRUE(t.ok()) << what << ": " << t.status();
    if (c.contains("date_string")) t->set_date_string(c.at("date_string"));
    std::vector<ChatMessage> messages;
    for (const nlohmann::json& m : c.at("messages")) messages.push_back({m.at("role"), m.at("content")});
    absl::StatusOr<std::string> text = t->Apply(messages, c.at("add_generation_prompt").get<bool>());
    if (c.contains("error")) {
      EXPECT_EQ(text.status().code(), absl::StatusCode::kInvalidArgument)
          << what << ": HF raised " << c.at("error") << " but Apply gave " << text.status();
      ++errors;
      continue;
    }
    ASSERT_TRUE(text.ok()) << what << ": " << text.status();
    EXPECT_EQ(*text, c.at("text").get<std::string>()) << what;
    absl::StatusOr<std::vector<int32_t>> ids =
        TokenizerFor(c.at("tokenizer")).Encode(*text, /*add_special_tokens=*/false);
    ASSERT_TRUE(ids.ok()) << what << ": " << ids.status();
    EXPECT_EQ(*ids, c.at("ids").get<std::vector<int32_t>>()) << what;
    ++checked[file];
  }
  // Every known template has goldens, and none is skipped silently.
  for (const ChatTemplate::Known& k : ChatTemplate::KnownTemplates()) {
    bool found = false;
    for (const auto& [file, n] : checked) found |= n >= 10 && Template(file) == k.text;
    EXPECT_TRUE(found) << k.variant << " has no goldens";
  }
  EXPECT_EQ(checked.size(), 8u);
  EXPECT_GE(errors, 11);
}

TEST_F(ChatTest, RecognisesEachVariantAndItsFamily) {
  const std::map<std::string, std::vector<std::string>> expected = {
      {"smollm2.jinja", {"chatml", "smollm2", "<|im_end|>"}},
      {"chatml.jinja", {"chatml", "chatml", "<|im_end|>"}},
      {"qwen2.5_instruct.jinja", {"chatml", "qwen2.5", "<|im_end|>"}},
      {"qwen3.jinja", {"chatml", "qwen3", "<|im_end|>"}},
      {"llama3.jinja", {"llama3", "llama3", "<|eot_id|>"}},
      {"llama3.1_instruct.jinja", {"llama3", "llama3.1", "<|eot_id|>"}},
      {"llama3.2_instruct.jinja", {"llama3", "llama3.2", "<|eot_id|>"}},
      {"gemma3_it.jinja", {"gemma", "gemma3", "<end_of_turn>"}},
  };
  EXPECT_EQ(ChatTemplate::KnownTemplates().size(), expected.size());
  for (const auto& [file, want] : expected) {
    absl::StatusOr<ChatTemplate> t = ChatTemplate::Recognize(Template(file));
    ASSERT_TRUE(t.ok()) << file << ": " << t.status();
    EXPECT_EQ(t->name(), want[0]) << file;
    EXPECT_EQ(t->variant(), want[1]) << file;
    EXPECT_EQ(t->end_of_turn(), want[2]) << file;
    // CRLF line ends and a newline after a final block tag render the same: still recognised.
    const std::string text = Template(file);
    const std::string crlf = absl::StrReplaceAll(text, {{"\n", "\r\n"}});
    EXPECT_TRUE(ChatTemplate::Recognize(crlf).ok()) << file;
    if (absl::EndsWith(text, "%}")) {
      EXPECT_TRUE(ChatTemplate::Recognize(text + "\n").ok()) << file;
    }
  }
}

TEST_F(ChatTest, RefusesAnUnrecognisedTemplate) {
  // A whitespace edit of a known template is refused: only exact texts are trusted.
  std::string edited = Template("gemma3_it.jinja");
  edited.replace(edited.find("'\\n\\n'"), 6, "'\\n'");
  absl::StatusOr<ChatTemplate> t = ChatTemplate::Recognize(edited);
  ASSERT_EQ(t.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(t.status().message(), HasSubstr("not recognised"));
  EXPECT_THAT(t.status().message(), HasSubstr("<start_of_turn> (Gemma)"));
  EXPECT_THAT(t.status().message(), HasSubstr("--chat_format=<llama3|chatml|gemma|raw>"));

  const std::string mistral =
      "{{ bos_token }}{% for message in messages %}{% if message['role'] == 'user' %}"
      "{{ '[INST] ' + message['content'] + ' [/INST]' }}{% endif %}{% endfor %}";
  t = ChatTemplate::Recognize(mistral);
  ASSERT_EQ(t.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(t.status().message(), HasSubstr("no family markers"));
  EXPECT_THAT(t.status().message(), HasSubstr("--chat_format="));

  t = ChatTemplate::Recognize(Template("chatml.jinja") + " ");
  ASSERT_FALSE(t.ok());
  EXPECT_THAT(t.status().message(), HasSubstr("<|im_start|> (ChatML)"));
}

TEST_F(ChatTest, ByName) {
  const std::vector<ChatMessage> chat = {{"system", "S"}, {"user", " Hi "}};
  struct Case {
    const char* name;
    const char* variant;
    const char* eot;
    const char* text;
  };
  const Case cases[] = {
      {"llama3", "llama3", "<|eot_id|>",
       "<|begin_of_text|><|start_header_id|>system<|end_header_id|>\n\nS<|eot_id|>"
       "<|start_header_id|>user<|end_header_id|>\n\nHi<|eot_id|>"
       "<|start_header_id|>assistant<|end_header_id|>\n\n"},
      {"chatml", "chatml", "<|im_end|>",
       "<|im_start|>system\nS<|im_end|>\n<|im_start|>user\n Hi <|im_end|>\n"
       "<|im_start|>assistant\n"},
      {"gemma", "gemma3", "<end_of_turn>",
       "<bos><start_of_turn>user\nS\n\nHi<end_of_turn>\n<start_of_turn>model\n"},
      {"raw", "raw", "", "S Hi "},
  };
  for (const Case& c : cases) {
    absl::StatusOr<ChatTemplate> t = ChatTemplate::ByName(c.name);
    ASSERT_TRUE(t.ok()) << c.name;
    EXPECT_EQ(t->name(), c.name);
    EXPECT_EQ(t->variant(), c.variant);
    EXPECT_EQ(t->end_of_turn(), c.eot);
    EXPECT_EQ(t->Apply(chat, true).value_or("<error>"), c.text) << c.name;
  }
  absl::StatusOr<ChatTemplate> bad = ChatTemplate::ByName("mistral");
  EXPECT_EQ(bad.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(bad.status().message(), HasSubstr("llama3, chatml, gemma and raw"));
}

TEST_F(ChatTest, RefusesUnknownRolesAndEmptyConversations) {
  for (const char* name : {"llama3", "chatml", "gemma", "raw"}) {
    const ChatTemplate t = ChatTemplate::ByName(name).value();
    absl::StatusOr<std::string> r = t.Apply({{"user", "a"}, {"tool", "b"}}, true);
    EXPECT_EQ(r.status().code(), absl::StatusCode::kInvalidArgument) << name;
    EXPECT_THAT(r.status().message(), HasSubstr("message 1 has role \"tool\"")) << name;
    r = t.Apply({}, true);
    EXPECT_EQ(r.status().code(), absl::StatusCode::kInvalidArgument) << name;
    EXPECT_THAT(r.status().message(), HasSubstr("empty conversation")) << name;
  }
  absl::StatusOr<std::string> r =
      ChatTemplate::ByName("gemma")->Apply({{"system", "s"}, {"user", "a"}, {"user", "b"}}, true);
  EXPECT_EQ(r.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(r.status().message(), HasSubstr("message 2"));
  EXPECT_THAT(r.status().message(), HasSubstr("alternate"));
}

TEST_F(ChatTest, Llama32RendersTheDayItIsGiven) {
  // HF's strftime_now("%d %b %Y") of the day set_today() gives (a zero-padded day, the
  // month's abbreviation), unless date_string pins the text.
  ChatTemplate t = ChatTemplate::Recognize(Template("llama3.2_instruct.jinja")).value();
  t.set_today(absl::CivilDay(2025, 3, 7));
  EXPECT_EQ(t.Apply({{"user", "a"}}, true).value(),
            "<|begin_of_text|><|start_header_id|>system<|end_header_id|>\n\n"
            "Cutting Knowledge Date: December 2023\nToday Date: 07 Mar 2025\n\n<|eot_id|>"
            "<|start_header_id|>user<|end_header_id|>\n\na<|eot_id|>"
            "<|start_header_id|>assistant<|end_header_id|>\n\n");
  t.set_today(absl::CivilDay(2024, 12, 31));
  EXPECT_THAT(t.Apply({{"user", "a"}}, false).value(), HasSubstr("Today Date: 31 Dec 2024\n"));
  t.set_date_string("01 Jan 2025");
  EXPECT_THAT(t.Apply({{"user", "a"}}, false).value(), HasSubstr("Today Date: 01 Jan 2025\n"));
  // Neither set: today's local date, of the same form. Not compared with a date the test
  // reads itself, which may be another day's by the time Apply reads the clock.
  const ChatTemplate today = ChatTemplate::Recognize(Template("llama3.2_instruct.jinja")).value();
  EXPECT_THAT(today.Apply({{"user", "a"}}, false).value(),
              ContainsRegex("\nToday Date: [0-3][0-9] [A-Z][a-z][a-z] 2[0-9][0-9][0-9]\n\n<"));
  // 3.1 / 3.3 always say 26 Jul 2024, whatever day they are given.
  ChatTemplate t31 = ChatTemplate::Recognize(Template("llama3.1_instruct.jinja")).value();
  t31.set_today(absl::CivilDay(2025, 3, 7));
  EXPECT_THAT(t31.Apply({{"user", "a"}}, false).value(), HasSubstr("Today Date: 26 Jul 2024\n"));
}

void WriteFile(const std::string& path, const std::string& text) {
  std::ofstream out(path, std::ios::binary);
  out << text;
  ASSERT_TRUE(out.good()) << path;
}

std::string MakeDir(const std::string& name) {
  const std::string dir = ::testing::TempDir() + "/" + name;
  ::mkdir(dir.c_str(), 0755);
  return dir;
}

TEST_F(ChatTest, LoadsTheTemplateFromGguf) {
  absl::StatusOr<std::string> text = LoadChatTemplateText(Path("smollm2_135m/model.gguf"));
  ASSERT_TRUE(text.ok()) << text.status();
  EXPECT_EQ(*text, Template("smollm2.jinja"));
  EXPECT_EQ(ChatTemplate::Recognize(*text)->variant(), "smollm2");
  // The trained Gemma 3 270M file carries none: ByName("gemma") is what applies to it.
  text = LoadChatTemplateText(Path("gemma3_270m/model.gguf"));
  EXPECT_EQ(text.status().code(), absl::StatusCode::kNotFound) << text.status();
  EXPECT_THAT(text.status().message(), HasSubstr("tokenizer.chat_template"));
}

TEST_F(ChatTest, LoadsTheTemplateFromACheckpointDirectory) {
  const std::string qwen = Template("qwen2.5_instruct.jinja");
  const std::string gemma = Template("gemma3_it.jinja");
  // tokenizer_config.json's string form; and through a tokenizer.json path (its sibling).
  const std::string dir = MakeDir("config_string");
  WriteFile(dir + "/tokenizer_config.json", nlohmann::json({{"chat_template", qwen}}).dump());
  WriteFile(dir + "/tokenizer.json", "{}");
  EXPECT_EQ(LoadChatTemplateText(dir).value_or(""), qwen);
  EXPECT_EQ(LoadChatTemplateText(dir + "/tokenizer.json").value_or(""), qwen);
  // The list form's "default" entry.
  const std::string list = MakeDir("config_list");
  nlohmann::json entries = nlohmann::json::array();
  entries.push_back({{"name", "tool_use"}, {"template", "x"}});
  entries.push_back({{"name", "default"}, {"template", gemma}});
  WriteFile(list + "/tokenizer_config.json", nlohmann::json({{"chat_template", entries}}).dump());
  EXPECT_EQ(LoadChatTemplateText(list).value_or(""), gemma);
  // chat_template.jinja comes first.
  WriteFile(list + "/chat_template.jinja", qwen);
  EXPECT_EQ(LoadChatTemplateText(list).value_or(""), qwen);
  // Neither: NotFound; a config without the field: NotFound.
  const std::string none = MakeDir("no_template");
  EXPECT_EQ(LoadChatTemplateText(none).status().code(), absl::StatusCode::kNotFound);
  WriteFile(none + "/tokenizer_config.json", R"({"bos_token": "<s>"})");
  EXPECT_EQ(LoadChatTemplateText(none).status().code(), absl::StatusCode::kNotFound);
  EXPECT_EQ(LoadChatTemplateText(none + "/absent").status().code(), absl::StatusCode::kNotFound);
}

}  // namespace
}  // namespace dk::tokenizer
