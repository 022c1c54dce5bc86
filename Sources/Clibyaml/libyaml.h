// The system's libyaml (YAML 1.1 parser), found through pkg-config
// (yaml-0.1.pc from libyaml-dev). The config reader calls its event API
// directly from Swift (BoardSupport/YAML/YAMLComposer.swift): every
// function it uses takes plain arguments and fills plain structs.
#include <yaml.h>
