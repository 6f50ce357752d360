// Known live memory per C++ function, for preload/tests/cxx_program.rs: allocations through
// operator new, new[], std::string, std::vector and std::make_unique, which libstdc++ serves with
// malloc. Prints `truth <site> <bytes>` (malloc_usable_size of each block kept) and exits with the
// blocks live. Built without frame pointers.
#include <malloc.h>

#include <cstdio>
#include <memory>
#include <string>
#include <vector>

namespace cxxsites {

struct Node {
    char payload[40];
    Node *next;
};

struct Kept {
    std::vector<std::unique_ptr<Node>> nodes;
    std::vector<char *> arrays;
    std::vector<std::string> strings;
    std::vector<std::vector<double>> vectors;
};

// Transient objects between the sites: they move the sampler and keep nothing.
__attribute__((noinline)) void churn(unsigned n) {
    for (unsigned i = 0; i < n; i++) {
        std::string s(16 + (i * 2654435761u) % 4000, 'c');
        asm volatile("" : : "r"(s.data()) : "memory");
    }
}

class Holder {
  public:
    // 100,000 nodes through std::make_unique (operator new).
    __attribute__((noinline)) size_t make_nodes(Kept &kept, size_t n) {
        size_t usable = 0;
        for (size_t i = 0; i < n; i++) {
            kept.nodes.push_back(std::make_unique<Node>());
            usable += malloc_usable_size(kept.nodes.back().get());
        }
        return usable;
    }
};

// 3,000 arrays through new[].
__attribute__((noinline)) size_t make_arrays(Kept &kept, size_t n) {
    size_t usable = 0;
    for (size_t i = 0; i < n; i++) {
        char *array = new char[2048];
        array[0] = 1;
        kept.arrays.push_back(array);
        usable += malloc_usable_size(array);
    }
    return usable;
}

// 20,000 strings of 300 characters (beyond the small-string buffer).
__attribute__((noinline)) size_t make_strings(Kept &kept, size_t n) {
    size_t usable = 0;
    for (size_t i = 0; i < n; i++) {
        kept.strings.emplace_back(300, static_cast<char>('a' + i % 26));
        usable += malloc_usable_size(kept.strings.back().data());
    }
    return usable;
}

// 500 vectors of 1,000 doubles, each grown by push_back (reallocations freed on the way).
template <typename T>
__attribute__((noinline)) size_t make_vectors(Kept &kept, size_t n) {
    size_t usable = 0;
    for (size_t i = 0; i < n; i++) {
        std::vector<T> v;
        for (int j = 0; j < 1000; j++) v.push_back(static_cast<T>(j));
        kept.vectors.push_back(std::move(v));
        usable += malloc_usable_size(kept.vectors.back().data());
    }
    return usable;
}

// 50,000 nodes allocated and deleted: nothing of them is live.
__attribute__((noinline)) void make_and_delete(size_t n) {
    std::vector<Node *> nodes;
    nodes.reserve(n);
    for (size_t i = 0; i < n; i++) nodes.push_back(new Node());
    for (Node *node : nodes) delete node;
}

}  // namespace cxxsites

int main() {
    // Never destroyed, so the blocks stay live through the exit-time dump (a static's destructor,
    // registered after the profiler's exit hook, would run before it and free them).
    cxxsites::Kept &kept = *new cxxsites::Kept;
    kept.nodes.reserve(100000);
    kept.arrays.reserve(3000);
    kept.strings.reserve(20000);
    kept.vectors.reserve(500);
    cxxsites::Holder holder;
    size_t nodes = holder.make_nodes(kept, 100000);
    cxxsites::churn(3000);
    size_t arrays = cxxsites::make_arrays(kept, 3000);
    size_t strings = cxxsites::make_strings(kept, 20000);
    cxxsites::churn(3000);
    size_t vectors = cxxsites::make_vectors<double>(kept, 500);
    cxxsites::make_and_delete(50000);
    std::printf("truth cxxsites::Holder::make_nodes %zu\n", nodes);
    std::printf("truth cxxsites::make_arrays %zu\n", arrays);
    std::printf("truth cxxsites::make_strings %zu\n", strings);
    std::printf("truth cxxsites::make_vectors<double> %zu\n", vectors);
    std::printf("truth cxxsites::make_and_delete 0\n");
    return 0;
}
