#pragma once

#include <string>
#include <vector>

#include "core/status.h"

namespace zen::ops {

// The IPv4 address of the network interface `name` on this host (getifaddrs), as text: what
// ZEN_IFACE's first interface binds, dials from and advertises. kInvalidArgument naming the
// interface when this host has no interface of that name (the message lists the ones it has)
// or when the interface has no IPv4 address.
Result<std::string> interfaceIpv4(const std::string& name);

// ZEN_IFACE's address: the first listed interface's (Horovod's GLOO_IFACE takes the first of
// horovodrun's --network-interface list too); "" when the list is empty.
Result<std::string> chosenInterfaceIpv4(const std::vector<std::string>& names);

}  // namespace zen::ops
