// A rank of a torchrun job that exchanges NCCL ids as communicator_from_environment does, with
// no GPU: rank 0 draws random ids, every rank receives them through torchrun's store, and
// rank 0 checks, through the same store, that every rank received exactly its ids. Exits
// non-zero, saying why, when the launch variables are not torchrun's or an id differs.
// Usage (under torchrun): torchrun_probe [exchanges, default 3]

#include <cstdlib>
#include <graphstep/error.hpp>
#include <graphstep/nccl/launch_environment.hpp>
#include <iostream>
#include <random>
#include <string>

#include "nccl/detail/rendezvous.hpp"
#include "nccl/detail/tcp_store.hpp"

namespace gn = graphstep::nccl;

int main(int argc, char** argv) {
  try {
    int const exchanges = argc > 1 ? std::atoi(argv[1]) : 3;
    gn::launch_environment const env = gn::read_launch_environment(gn::process_environment());
    std::cout << gn::describe(env) << "\n";
    if (env.bootstrap != gn::bootstrap_kind::torchrun_store) {
      std::cerr << "torchrun_probe: expected torchrun's agent store, found the bootstrap '"
                << gn::name(env.bootstrap) << "'\n";
      return 2;
    }
    std::random_device entropy;
    std::chrono::seconds const timeout{60};
    gn::detail::tcp_store check{env.master_addr, env.master_port, timeout};
    for (int exchange = 0; exchange < exchanges; ++exchange) {
      gn::unique_id_bytes drawn{};
      if (env.rank == 0) {
        for (auto& byte : drawn) byte = static_cast<unsigned char>(entropy());
      }
      gn::unique_id_bytes const id = gn::detail::exchange_unique_id(env, drawn, timeout).id;
      std::string const received =
          "torchrun_probe/" + env.run_id + "/" + std::to_string(exchange) + "/rank/";
      check.set(received + std::to_string(env.rank), {id.begin(), id.end()});
      if (env.rank != 0) continue;
      for (int rank = 1; rank < env.world_size; ++rank) {
        auto const theirs = check.get(received + std::to_string(rank), timeout);
        if (!std::equal(theirs.begin(), theirs.end(), drawn.begin(), drawn.end())) {
          std::cerr << "torchrun_probe: rank " << rank << " received another id in exchange "
                    << exchange << "\n";
          return 1;
        }
      }
      std::cout << "exchange " << exchange << ": all " << env.world_size
                << " ranks hold rank 0's id\n";
    }
    return 0;
  } catch (graphstep::error const& e) {
    std::cerr << "torchrun_probe: " << e.what() << "\n";
    return 1;
  }
}
