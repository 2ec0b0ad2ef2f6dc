// GroupNorm's two-pass structure as a bare loop, for the shape N2 C1280 16x16 G32 in fp32:
// per (n, group) task, sum dY * (X - m) and dY plane by plane, then write dX over the group
// (its inputs now in L2). No parameter I/O, no call overhead: the time this structure takes on
// the machine, to compare with the op (docs/performance.md, "Targets missed"). The second
// figure moves the same bytes in two sweeps over all the data: one reading dY and X (a product
// and a compare per vector, lighter than the sums), then one writing dX.
// Build and run (x86-64 with AVX-512):
//   g++ -O2 -march=native -fopenmp group_norm_two_pass.cpp -o gn2 && OMP_NUM_THREADS=2 ./gn2 [misalign]
// misalign (floats, default 0) offsets dY and X from a 64-byte line, as NumPy's allocations are.
#include <immintrin.h>
#include <omp.h>
#include <cstdio>
#include <cstdlib>
#include <vector>
#include <algorithm>
#include <chrono>
static double now(){return std::chrono::duration<double>(std::chrono::steady_clock::now().time_since_epoch()).count();}
int main(int argc, char** argv) {
  const long N=2,C=1280,HW=256,G=32,D=C/G; long n=N*C*HW; long ge=D*HW;
  int mis=argc>1?atoi(argv[1]):0; float* x=(float*)aligned_alloc(64,n*4+64)+mis; float* y=(float*)aligned_alloc(64,n*4+64)+mis; float* d=(float*)aligned_alloc(64,n*4);
  for(long i=0;i<n;++i){x[i]=i*1e-3f;y[i]=1.f;d[i]=0;}
  volatile float sink;
  std::vector<double> t[3];
  for(int r=0;r<300;++r){
    double t0=now();
    // grouped: per group sums then write (planes of HW, reduce per plane)
    #pragma omp parallel for schedule(dynamic,1)
    for(long g=0;g<N*G;++g){
      const float* xs=x+g*ge; const float* ys=y+g*ge; float* ds=d+g*ge;
      float tot=0;
      for(long c=0;c<D;++c){ __m512 a=_mm512_setzero_ps(),b=_mm512_setzero_ps(),a2=a,b2=a;
        for(long i=0;i<HW;i+=32){__m512 dy=_mm512_loadu_ps(ys+c*HW+i),dy2=_mm512_loadu_ps(ys+c*HW+i+16); a=_mm512_fmadd_ps(dy,_mm512_sub_ps(_mm512_loadu_ps(xs+c*HW+i),_mm512_set1_ps(0.5f)),a); a2=_mm512_fmadd_ps(dy2,_mm512_sub_ps(_mm512_loadu_ps(xs+c*HW+i+16),_mm512_set1_ps(0.5f)),a2); b=_mm512_add_ps(b,dy); b2=_mm512_add_ps(b2,dy2);}
        tot+=_mm512_reduce_add_ps(_mm512_add_ps(a,a2))+_mm512_reduce_add_ps(_mm512_add_ps(b,b2)); }
      __m512 c1=_mm512_set1_ps(tot*1e-9f);
      for(long i=0;i<ge;i+=16) _mm512_store_ps(ds+i,_mm512_fmadd_ps(_mm512_loadu_ps(ys+i),c1,_mm512_fmadd_ps(_mm512_sub_ps(_mm512_loadu_ps(xs+i),c1),c1,c1)));
    }
    double t1=now();
    // two global passes
    float tot=0;
    #pragma omp parallel for schedule(static) reduction(+:tot)
    for(long i=0;i<n;i+=16){ tot+= (i&1023)==0 ? 1.f:0.f; __m512 a=_mm512_mul_ps(_mm512_loadu_ps(x+i),_mm512_loadu_ps(y+i)); if(_mm512_cmp_ps_mask(a,_mm512_set1_ps(-1e30f),_CMP_LT_OQ)) tot+=1;}
    #pragma omp parallel for schedule(static)
    for(long i=0;i<n;i+=16) _mm512_store_ps(d+i,_mm512_fmadd_ps(_mm512_loadu_ps(y+i),_mm512_set1_ps(2.f),_mm512_loadu_ps(x+i)));
    double t2=now();
    t[0].push_back(t1-t0);t[1].push_back(t2-t1); sink=tot;
  }
  auto med=[](std::vector<double>&v){std::sort(v.begin(),v.end());return v[v.size()/2]*1e3;};
  printf("grouped %.4f  two-global-passes %.4f ms\n",med(t[0]),med(t[1]));
}
