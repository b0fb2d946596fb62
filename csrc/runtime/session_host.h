// The runtime's BackendHost (core/backend_host.h): what backends ask of the sessions, answered
// by the process's SessionManager (the one a fork() child made afresh, too). Installed by
// SessionManager::global() when it makes the first manager.
#pragma once

#include "core/backend_host.h"

namespace proton {

BackendHost &sessionHost();  // lives as long as the process

}  // namespace proton
