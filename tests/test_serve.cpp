// The training service's parts without HTTP (issue 36): the SQLite task store (persistence, the
// crash rule, a corrupt or foreign file refused and left as it was), the path checks every
// request goes through (.., absolute, symlinks out of the root), template names, overrides of
// path keys kept inside the root, the template descriptions (every key documented, a broken
// template listed with the loader's message) and the default templates, which must all load.
// The HTTP API, the child processes and the page are tested through the binary by
// tests/py/serve_api.py and tests/py/serve_browser.py.
#include <gtest/gtest.h>
#include <unistd.h>

#include <fstream>

#include "config/config.h"
#include "core/error.h"
#include "serve/paths.h"
#include "serve/task_store.h"
#include "serve/templates.h"
#include "test_util.h"

namespace seqtrain::serve {
namespace {
using seqtrain::testing::TempDir;
using seqtrain::testing::write_file;
namespace fs = std::filesystem;

std::string slurp(const fs::path& p) {
  std::ifstream in(p, std::ios::binary);
  return std::string(std::istreambuf_iterator<char>(in), {});
}

TEST(ServeStore, TasksPersistAcrossReopeningInQueueOrder) {
  TempDir dir;
  const fs::path db = dir / "tasks.db";
  {
    TaskStore s(db);
    EXPECT_EQ(s.add("a.yaml", "{}", 10.0), 1);
    EXPECT_EQ(s.add("b.yaml", R"({"train.epochs":"2"})", 11.0), 2);
    Task t = *s.get(2);
    t.state = TaskState::running;
    t.pid = 4242;
    t.progress = 0.5;
    t.best_name = "val_loss";
    t.best = 0.25;
    s.update(t);
  }
  TaskStore s(db);
  const std::vector<Task> all = s.list();
  ASSERT_EQ(all.size(), 2u);
  EXPECT_EQ(all[0].template_name, "a.yaml");
  EXPECT_EQ(all[1].overrides, R"({"train.epochs":"2"})");
  EXPECT_EQ(all[1].state, TaskState::running);
  EXPECT_EQ(all[1].pid, 4242);
  EXPECT_DOUBLE_EQ(all[1].best, 0.25);
  EXPECT_EQ(s.in_state(TaskState::queued).size(), 1u);
  EXPECT_FALSE(s.get(3).has_value());
}

TEST(ServeStore, ACrashLeavesRunningTasksInterrupted) {
  TempDir dir;
  TaskStore s(dir / "tasks.db");
  s.add("a.yaml", "{}", 1);
  s.add("b.yaml", "{}", 2);
  Task t = *s.get(1);
  t.state = TaskState::running;
  s.update(t);
  const std::vector<Task> hit = s.interrupt_running(5);
  ASSERT_EQ(hit.size(), 1u);
  EXPECT_EQ(s.get(1)->state, TaskState::interrupted);
  EXPECT_DOUBLE_EQ(s.get(1)->ended_s, 5);
  EXPECT_NE(s.get(1)->error.find("resume"), std::string::npos);
  EXPECT_EQ(s.get(2)->state, TaskState::queued);
}

TEST(ServeStore, ACorruptFileIsRefusedByNameAndNeverOverwritten) {
  TempDir dir;
  const std::string garbage(8192, 'x');
  const std::string file = write_file(dir, "tasks.db", "this is not sqlite " + garbage);
  try {
    TaskStore s(file);
    FAIL() << "opened a corrupt database";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find(file), std::string::npos) << e.what();
    EXPECT_NE(std::string(e.what()).find("never overwrites"), std::string::npos) << e.what();
  }
  EXPECT_EQ(slurp(file), "this is not sqlite " + garbage);
}

TEST(ServeStore, AnotherProgramsDatabaseIsRefused) {
  TempDir dir;
  const fs::path file = dir / "other.db";
  {
    TaskStore s(file);  // makes a valid SQLite file, then we mark it as someone else's
  }
  ASSERT_EQ(std::system(("/usr/bin/python3 -c \"import sqlite3; c=sqlite3.connect('" + file.string() +
                         "'); c.execute('PRAGMA user_version=7'); c.commit()\"").c_str()),
            0);
  EXPECT_THROW(TaskStore s(file), Error);
}

TEST(ServeStore, AFileWhereTheDirectoryShouldBeIsAClearError) {
  TempDir dir;
  write_file(dir, "blocker", "x");
  EXPECT_THROW(TaskStore s(fs::path(dir / "blocker") / "tasks.db"), Error);
}

TEST(ServePaths, NamesThatLeaveTheBaseAreRefused) {
  TempDir dir;
  fs::create_directories(dir.path / "run" / "checkpoints");
  write_file(dir, "run/metrics.jsonl", "{}\n");
  write_file(dir, "secret.txt", "no");
  fs::create_symlink(dir.path / "secret.txt", dir.path / "run" / "link");
  fs::create_symlink(dir.path, dir.path / "run" / "up");
  const fs::path run = dir.path / "run";
  std::string why;
  EXPECT_EQ(resolve_inside(run, "metrics.jsonl", &why), fs::canonical(run / "metrics.jsonl"));
  EXPECT_FALSE(resolve_inside(run, "checkpoints", &why).empty());
  for (const char* bad : {"../secret.txt", "checkpoints/../../secret.txt", "/etc/passwd", "", "link", "up/secret.txt"}) {
    EXPECT_TRUE(resolve_inside(run, bad, &why).empty()) << bad;
    EXPECT_FALSE(why.empty()) << bad;
  }
  EXPECT_TRUE(resolve_inside(run, std::string("a\0b", 3), &why).empty());
}

TEST(ServePaths, TemplateNames) {
  for (const char* ok : {"lstm.yaml", "a-b_c.1.yml"}) EXPECT_TRUE(valid_template_name(ok)) << ok;
  for (const char* bad : {"", ".hidden.yaml", "../x.yaml", "a/b.yaml", "x.txt", "x yaml.yaml", ".yaml"})
    EXPECT_FALSE(valid_template_name(bad)) << bad;
}

TEST(ServeTemplates, PathOverridesStayInsideTheRoot) {
  TempDir dir;
  const fs::path root = fs::canonical(dir.path);
  const auto args = override_args(nlohmann::json{{"train.epochs", 3}, {"data.path", "data/x.csv"}}, root);
  ASSERT_EQ(args.size(), 2u);
  EXPECT_EQ(args[0], "data.path=" + (root / "data/x.csv").string());
  EXPECT_EQ(args[1], "train.epochs=3");
  for (const char* bad : {"/etc/passwd", "../outside.csv", "data/../../x"})
    EXPECT_THROW(override_args(nlohmann::json{{"data.path", bad}}, root), Error) << bad;
  EXPECT_THROW(override_args(nlohmann::json::array(), root), Error);
  EXPECT_THROW(override_args(nlohmann::json{{"train.epochs", nlohmann::json::object()}}, root), Error);
  EXPECT_THROW(override_args(nlohmann::json{{"seed", "1\nmodel: x"}}, root), Error);
}

TEST(ServeTemplates, EveryKeyIsDocumentedAndABrokenTemplateSaysWhy) {
  for (const std::string& k : config_keys()) EXPECT_TRUE(key_docs().count(k)) << k << " has no row in docs/CONFIG.md";
  TempDir dir;
  write_file(dir, "good.yaml", "# A small one.\n# Two lines.\ntrain:\n  epochs: 3\n");
  write_file(dir, "bad.yaml", "train:\n  epocs: 3\n");
  write_file(dir, "notes.txt", "ignored");
  const auto list = list_templates(dir.path);
  ASSERT_EQ(list.size(), 2u);
  EXPECT_EQ(list[0].name, "bad.yaml");
  EXPECT_NE(list[0].error.find("train.epochs"), std::string::npos) << list[0].error;  // the suggestion
  EXPECT_TRUE(list[0].fields.empty());
  const TemplateInfo& good = list[1];
  EXPECT_TRUE(good.error.empty()) << good.error;
  EXPECT_EQ(good.description, "A small one. Two lines.");
  EXPECT_EQ(good.fields.size(), config_keys().size());
  bool saw = false;
  for (const TemplateField& f : good.fields) {
    if (f.key == "train.epochs") {
      saw = true;
      EXPECT_EQ(f.value, "3");
      EXPECT_TRUE(f.in_template);
      EXPECT_NE(f.default_value, "3");
      EXPECT_FALSE(f.doc.empty());
    }
    if (f.key == "data.path") {
      EXPECT_TRUE(f.path);
    }
    if (f.key == "data.lookback") {
      EXPECT_FALSE(f.in_template);
    }
  }
  EXPECT_TRUE(saw);
}

TEST(ServeTemplates, TheDefaultTemplatesLoadAndAreWrittenOnce) {
  TempDir dir;
  const fs::path root = fs::canonical(dir.path);
  EXPECT_FALSE(install_default_templates(root).empty());
  const auto list = list_templates(root / "templates");
  ASSERT_EQ(list.size(), 4u);
  for (const TemplateInfo& t : list) EXPECT_TRUE(t.error.empty()) << t.name << ": " << t.error;
  const Config lstm = load_config((root / "templates" / "lstm_forecaster.yaml").string());
  EXPECT_EQ(lstm.data.lookback, 150);
  EXPECT_EQ(lstm.train.batch_size, 256);
  EXPECT_EQ(load_config((root / "templates" / "fnn_baseline.yaml").string()).model.type, "mlp");
  EXPECT_TRUE(fs::exists(root / "data" / "sets" / "train_x.npy"));
  write_file(dir, "templates/mine.yaml", "seed: 1\n");
  EXPECT_TRUE(install_default_templates(root).empty());  // an existing templates/ is the user's
  EXPECT_TRUE(fs::exists(root / "templates" / "mine.yaml"));
}

}  // namespace
}  // namespace seqtrain::serve
