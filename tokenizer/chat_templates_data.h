// The known chat templates' texts, compiled in from tokenizer/testdata/chat_templates/*.jinja
// by the //tokenizer:chat_templates_data_cc genrule (chat.h says why they are matched exactly).
#ifndef DK_TOKENIZER_CHAT_TEMPLATES_DATA_H_
#define DK_TOKENIZER_CHAT_TEMPLATES_DATA_H_

namespace dk::tokenizer::chat_internal {

struct TemplateFile {
  const char* file;  // e.g. "qwen3.jinja"
  const char* text;
};

extern const TemplateFile kTemplateFiles[];
extern const int kNumTemplateFiles;

}  // namespace dk::tokenizer::chat_internal

#endif  // DK_TOKENIZER_CHAT_TEMPLATES_DATA_H_
