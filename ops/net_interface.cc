// Looking up an interface's IPv4 address for ZEN_IFACE. IPv4 only, as Horovod's Gloo
// interface choice: the TCP mesh's address table and the launcher speak IPv4 addresses.
#include "ops/net_interface.h"

#include <arpa/inet.h>
#include <ifaddrs.h>
#include <netinet/in.h>

#include <algorithm>
#include <cerrno>
#include <cstring>

namespace zen::ops {

Result<std::string> interfaceIpv4(const std::string& name) {
  ifaddrs* list = nullptr;
  if (getifaddrs(&list) != 0) {
    return ZEN_ERROR(StatusCode::kIoError, "ZEN_IFACE: cannot list the network interfaces: {}",
                     std::strerror(errno));
  }
  std::vector<std::string> names;  // this host's interfaces, for the error message
  bool found = false;
  std::string address;
  for (const ifaddrs* i = list; i != nullptr; i = i->ifa_next) {
    if (i->ifa_name == nullptr) continue;
    const std::string here(i->ifa_name);
    if (std::find(names.begin(), names.end(), here) == names.end()) names.push_back(here);
    if (here != name) continue;
    found = true;
    if (address.empty() && i->ifa_addr != nullptr && i->ifa_addr->sa_family == AF_INET) {
      char text[INET_ADDRSTRLEN] = {};
      const auto* in = reinterpret_cast<const sockaddr_in*>(i->ifa_addr);
      if (inet_ntop(AF_INET, &in->sin_addr, text, sizeof(text)) != nullptr) address = text;
    }
  }
  freeifaddrs(list);
  if (!found) {
    std::string known;
    for (const std::string& n : names) known += (known.empty() ? "" : ", ") + n;
    return ZEN_ERROR(StatusCode::kInvalidArgument,
                     "ZEN_IFACE: no network interface '{}' on this host (it has: {})", name,
                     known.empty() ? "none" : known);
  }
  if (address.empty()) {
    return ZEN_ERROR(StatusCode::kInvalidArgument,
                     "ZEN_IFACE: network interface '{}' has no IPv4 address on this host", name);
  }
  return address;
}

Result<std::string> chosenInterfaceIpv4(const std::vector<std::string>& names) {
  if (names.empty()) return std::string();
  return interfaceIpv4(names.front());
}

}  // namespace zen::ops
