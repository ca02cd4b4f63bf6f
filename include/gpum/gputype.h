/* SPDX-License-Identifier: Apache-2.0 */
/*
 * GPU types as people write them.
 *
 * One reading of the names drivers report and people type: "NVIDIA A100-SXM4-40GB", "Tesla
 * V100-PCIE-32GB", "NVIDIA H100 80GB HBM3", "NVIDIA GeForce RTX 4090", "NVIDIA RTX A6000", "AMD
 * Instinct MI300X", "Intel(R) Data Center GPU Max 1550", or a bare "V100", "a100", "RTX3090",
 * "rtx 4090". A name becomes a vendor, a family (the card's short canonical form), the memory
 * the name states and the form factor the name states.
 *
 * How a name is read (gpum_gpu_type_parse). "(R)" and "(TM)" are dropped; the rest is split
 * into words at spaces and at - _ / , ( ), and each word is taken, without case, as:
 *   - a vendor word: NVIDIA, Tesla, Quadro, GeForce (nvidia); AMD, ATI, Radeon, Instinct (amd);
 *     Intel, Arc (intel);
 *   - a form factor: SXM, SXM2..SXM5 (SXM), PCIe (PCIe);
 *   - a memory figure: a number followed by GB, G or GiB ("40GB", "141GB", "80G"). The figure is
 *     kept as the vendor writes it: GB on the box, which the driver reports as about that many
 *     GiB;
 *   - a memory kind (HBM2, HBM3e, GDDR6...): ignored;
 *   - a prefix joined to the word after it: RTX, GTX, RX, TITAN, Max, Flex ("RTX 4090" is
 *     RTX4090, "Max 1550" MAX1550, "TITAN RTX" TITANRTX), except that RTX before a word that
 *     starts with a letter is dropped ("RTX A6000" is A6000);
 *   - a suffix joined to the family just read: Ti, SUPER, XT, XTX, Ada ("RTX 3090 Ti" is
 *     RTX3090TI, "RTX 6000 Ada Generation" RTX6000ADA);
 *   - the first other word with a digit in it is the family ("A100", "T4", "MI300X", "L40S");
 *     later ones are ignored, as are words without a digit (Data, Center, GPU, NVL...).
 * The family is written in upper case. A name without a vendor word takes the vendor of its
 * family in the table below, or of its prefix (RTX, GTX, TITAN: nvidia; RX: amd; Max, Flex:
 * intel). A family the table does not list is still read ("NVIDIA B100" is family B100).
 *
 * Matching (gpum_gpu_type_matches), how gpumd reads a request's GPU type (the socket
 * protocol's "model", REST's "gpu_type", gpum run/reserve --type). want matches a device name
 * when the first rule that applies to want says so:
 *   1. NULL or "": every device.
 *   2. with *, ? or [: a shell pattern (fnmatch(3), without case) that matches the whole
 *      device name or the device's family: "*A100*", "NVIDIA H100*", "A100*", "H1??".
 *   3. "nvidia", "amd" or "intel" (any case): every device of that vendor.
 *   4. any other word: the device name itself, without case; or a type read as above whose
 *      family is the device's family, and, where want says more, agrees in that too: its vendor,
 *      its memory (the device's stated figure, or the table's for its family when the device's
 *      name states none) and its form factor (which the device's name must state). "a100" and
 *      "NVIDIA A100" match "NVIDIA A100-SXM4-80GB"; "A100-80GB" and "A100 80GB" match it, not
 *      an A100-SXM4-40GB; "A10" matches an A10, never an A100 or an A10G; "H100 SXM" does not
 *      match "NVIDIA H100 80GB HBM3", whose name states no form factor. A word that reads as
 *      no family ("SXM4", "HBM3", "80GB") matches nothing but a device of that very name.
 *
 * The memory table (gpum_gpu_type_memory_gb): the nominal memory of a card of a family, in GB
 * as the vendor writes it, per GPU as the driver shows it (an A16 board is four 16 GB GPUs).
 * Where a family comes in several sizes the table holds its largest common one: T4 16, P4 8,
 * P40 24, P100 16 (also 12), V100 32 (also 16), V100S 32, A2 16, A10 24, A10G 24, A16 16,
 * A30 24, A40 48, A100 80 (also 40), A800 80 (also 40), H100 80 (the H100 NVL has 94, which its
 * name does not state), H800 80, H20 96, H200 141, GH200 144 (also 96), B200 180, L4 24, L20 48,
 * L40 48, L40S 48, A4000 16, A5000 24, A6000 48, RTX6000 24, RTX8000 48, RTX5000ADA 32,
 * RTX6000ADA 48, TITANV 12, TITANRTX 24, RTX2080TI 11, RTX3080 12 (also 10), RTX3080TI 12,
 * RTX3090 24, RTX3090TI 24, RTX4080 16, RTX4080SUPER 16, RTX4090 24, RTX5090 32, MI50 32 (also
 * 16), MI60 32, MI100 32, MI210 64, MI250 128, MI250X 128, MI300A 128, MI300X 192, MI325X 256,
 * W7900 48, RX7900XTX 24, MAX1100 48, MAX1550 128, FLEX140 12, FLEX170 16, A770 16.
 *
 * All functions are pure and thread-safe, allocate nothing, and set this thread's detail
 * message (gpum_last_error) on failure.
 */
#ifndef GPUM_GPUTYPE_H
#define GPUM_GPUTYPE_H

#include <stdbool.h>

#include <gpum/export.h>

#ifdef __cplusplus
extern "C" {
#endif

typedef enum {
  GPUM_GPU_VENDOR_UNKNOWN = 0,
  GPUM_GPU_VENDOR_NVIDIA = 1,
  GPUM_GPU_VENDOR_AMD = 2,
  GPUM_GPU_VENDOR_INTEL = 3,
} gpum_gpu_vendor_t;

typedef enum {
  GPUM_GPU_FORM_UNKNOWN = 0, /* the name does not say */
  GPUM_GPU_FORM_SXM = 1,
  GPUM_GPU_FORM_PCIE = 2,
} gpum_gpu_form_t;

/* A family's length, NUL included; a longer family is GPUM_EINVAL. */
#define GPUM_GPU_FAMILY_LEN 32
/* The longest name read, in bytes without the NUL; a longer one is GPUM_EINVAL. */
#define GPUM_GPU_NAME_MAX 255

typedef struct {
  gpum_gpu_vendor_t vendor;         /* stated, or the family's or prefix's; may be UNKNOWN */
  char family[GPUM_GPU_FAMILY_LEN]; /* "A100", "RTX4090", "MI300X"; "" when the name has none */
  double memory_gb;                 /* the figure the name states ("40GB": 40); 0 when none */
  gpum_gpu_form_t form;             /* the form factor the name states, or UNKNOWN */
} gpum_gpu_type_t;

/* Reads name as described above into *out. Returns 0 when the name states a vendor or a family
 * (a vendor alone, "NVIDIA", gives family ""), GPUM_EINVAL when name or out is NULL, name is
 * empty or longer than GPUM_GPU_NAME_MAX, has a byte other than ASCII letters, digits, space
 * and - _ . / , ( ), states neither, or its family is longer than GPUM_GPU_FAMILY_LEN - 1.
 * *out is untouched on error. */
GPUM_API int gpum_gpu_type_parse(const char *name, gpum_gpu_type_t *out);

/* True when the GPU type want (a request's) matches the device called device_name (as the
 * driver reports it), by the rules above. A NULL device_name is taken as "". Never fails and
 * leaves the detail message alone. */
GPUM_API bool gpum_gpu_type_matches(const char *want, const char *device_name);
/* gpum_gpu_type_matches for a device whose vendor the device layer knows (its
 * gpum_device_info_t.vendor: "nvidia", "amd", "intel"): rule 3 then asks that vendor rather
 * than the name, which does not always say it. vendor NULL or "": the name decides, as
 * gpum_gpu_type_matches. */
GPUM_API bool gpum_gpu_type_matches_device(const char *want, const char *device_name,
                                           const char *vendor);

/* The nominal memory of a card of the family family_or_name names, in GB, into *gb: the figure
 * the name states when it states one ("A100-40GB": 40), else the family's from the table above
 * ("A100": 80, its largest common size). GH200's names state the superchip's memory ("NVIDIA
 * GH200 480GB"), not the GPU's: the table's figure is given for them. Returns 0, GPUM_EINVAL
 * when the name does not read (gpum_gpu_type_parse) or states no family, GPUM_ENOENT when it
 * states no memory and the table does not list its family. *gb is untouched on error. */
GPUM_API int gpum_gpu_type_memory_gb(const char *family_or_name, double *gb);

/* "nvidia", "amd", "intel"; "unknown" for anything else. Never NULL. */
GPUM_API const char *gpum_gpu_vendor_name(gpum_gpu_vendor_t vendor);

/* "SXM", "PCIe"; "unknown" for anything else. Never NULL. */
GPUM_API const char *gpum_gpu_form_name(gpum_gpu_form_t form);

#ifdef __cplusplus
}
#endif
#endif /* GPUM_GPUTYPE_H */
