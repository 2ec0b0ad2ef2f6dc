// Memory ceilings of this machine for GroupNorm bf16 N8 C320 64x64 (21 MB per tensor): a
// streamed write of 21 MB, a read of 42 MB, one pass reading 42 MB and streaming 21 MB, and a
// normal (read-for-ownership) write of 21 MB. docs/performance.md compares the op with them.
// The source holds values other than zero: the read-and-stream pass once streamed 0 + 0, and
// the Zen 4 guests stream all-zero lines 2-3.5x faster than others (write_channel.cpp), which
// made that ceiling 11-15% lower than an op writing real data can reach (two pairs of runs:
// 0.79 and 0.99 ms against 0.89 and 1.14).
// Build and run (x86-64 with AVX-512):
//   g++ -O2 -march=native -fopenmp memory_ceilings.cpp -o ceil && OMP_NUM_THREADS=2 ./ceil
#include <immintrin.h>
#include <omp.h>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <vector>
#include <algorithm>
#include <chrono>
static double now(){return std::chrono::duration<double>(std::chrono::steady_clock::now().time_since_epoch()).count();}
int main(){
  size_t n=21*1024*1024/4; float* a=(float*)aligned_alloc(64,n*4); float* b=(float*)aligned_alloc(64,n*4*2);
  memset(a,0,n*4); for(size_t i=0;i<2*n;++i) b[i]=float(i%1000)+0.5f;
  std::vector<double> tw,tr,tc,tm;
  for(int r=0;r<30;++r){
    double t0=now();
    #pragma omp parallel for schedule(static)
    for(size_t i=0;i<n;i+=16) _mm512_stream_ps(a+i,_mm512_set1_ps(1.f));
    double t1=now();
    float s=0;
    #pragma omp parallel reduction(+:s)
    { __m512 acc=_mm512_setzero_ps(), acc2=_mm512_setzero_ps();
    #pragma omp for schedule(static)
    for(size_t i=0;i<2*n;i+=32) {acc=_mm512_add_ps(acc,_mm512_load_ps(b+i)); acc2=_mm512_add_ps(acc2,_mm512_load_ps(b+i+16));}
    s+=_mm512_reduce_add_ps(_mm512_add_ps(acc,acc2)); }
    double t2=now();
    #pragma omp parallel for schedule(static)
    for(size_t i=0;i<n;i+=16) _mm512_stream_ps(a+i,_mm512_add_ps(_mm512_load_ps(b+i),_mm512_load_ps(b+n+i)));
    double t3=now();
    #pragma omp parallel for schedule(static)
    for(size_t i=0;i<n;i+=16) _mm512_store_ps(a+i,_mm512_set1_ps(1.f));
    double t4=now();
    tw.push_back(t1-t0);tr.push_back(t2-t1);tc.push_back(t3-t2);tm.push_back(t4-t3); if(s==1234)puts("");
  }
  auto med=[](std::vector<double>&v){std::sort(v.begin(),v.end());return v[v.size()/2]*1e3;};
  printf("NT write 21MB %.3f ms, read 42MB %.3f ms, read42+NTwrite21 %.3f ms, normal write 21MB %.3f\n",med(tw),med(tr),med(tc),med(tm));
}
